.alloc data inp 32
.alloc kernel wgt 4
.alloc bias acc 2
.alloc res out 32
.alloc uops uop 56
.uop uops 2 0 0
.uop uops 3 0 0
.uop uops 4 0 0
.uop uops 5 0 0
.uop uops 6 0 0
.uop uops 7 0 0
.uop uops 8 0 0
.uop uops 9 0 0
.uop uops 2 0 0
.uop uops 3 2 0
.uop uops 4 4 0
.uop uops 5 6 0
.uop uops 6 8 0
.uop uops 7 10 0
.uop uops 8 12 0
.uop uops 9 14 0
.uop uops 2 1 1
.uop uops 3 3 1
.uop uops 4 5 1
.uop uops 5 7 1
.uop uops 6 9 1
.uop uops 7 11 1
.uop uops 8 13 1
.uop uops 9 15 1
.uop uops 10 0 0
.uop uops 11 0 0
.uop uops 12 0 0
.uop uops 13 0 0
.uop uops 14 0 0
.uop uops 15 0 0
.uop uops 16 0 0
.uop uops 17 0 0
.uop uops 10 16 2
.uop uops 11 18 2
.uop uops 12 20 2
.uop uops 13 22 2
.uop uops 14 24 2
.uop uops 15 26 2
.uop uops 16 28 2
.uop uops 17 30 2
.uop uops 10 17 3
.uop uops 11 19 3
.uop uops 12 21 3
.uop uops 13 23 3
.uop uops 14 25 3
.uop uops 15 27 3
.uop uops 16 29 3
.uop uops 17 31 3
.uop uops 10 1 0
.uop uops 11 1 0
.uop uops 12 1 0
.uop uops 13 1 0
.uop uops 14 1 0
.uop uops 15 1 0
.uop uops 16 1 0
.uop uops 17 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=56 stride=56
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=2 stride=2
LOAD.WGT sram=2 dram=kernel+2 y=1 x=2 stride=2
GEMM reset uop=0:8 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=1 x=16 stride=16 | push_next
GEMM uop=8:24 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev push_prev
ALU.SHR uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=0:8 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=8 x=1 stride=2 | pop_prev push_prev
GEMM reset uop=24:32 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=16 dram=data+0 y=1 x=16 stride=16 | push_next
GEMM uop=32:48 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev push_prev
ALU.SHR uop=24:32 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=48:56 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=24:32 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=24:32 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=10 dram=res+1 y=8 x=1 stride=2 | pop_prev push_prev
GEMM reset uop=0:8 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=0 dram=data+16 y=1 x=16 stride=16 | pop_next push_next
GEMM uop=8:24 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
ALU.SHR uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=0:8 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+16 y=8 x=1 stride=2 | pop_prev
GEMM reset uop=24:32 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=16 dram=data+16 y=1 x=16 stride=16 | pop_next push_next
GEMM uop=32:48 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
ALU.SHR uop=24:32 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=48:56 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=24:32 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=24:32 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=10 dram=res+17 y=8 x=1 stride=2 | pop_prev
FINISH
