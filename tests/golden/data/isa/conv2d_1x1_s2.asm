.alloc data inp 64
.alloc kernel wgt 2
.alloc bias acc 2
.alloc res out 32
.alloc uops uop 32
.uop uops 2 0 0
.uop uops 3 2 0
.uop uops 4 4 0
.uop uops 5 6 0
.uop uops 6 0 1
.uop uops 7 2 1
.uop uops 8 4 1
.uop uops 9 6 1
.uop uops 2 0 0
.uop uops 3 0 0
.uop uops 4 0 0
.uop uops 5 0 0
.uop uops 6 1 0
.uop uops 7 1 0
.uop uops 8 1 0
.uop uops 9 1 0
.uop uops 10 7 0
.uop uops 11 9 0
.uop uops 12 11 0
.uop uops 13 13 0
.uop uops 14 7 1
.uop uops 15 9 1
.uop uops 16 11 1
.uop uops 17 13 1
.uop uops 10 0 0
.uop uops 11 0 0
.uop uops 12 0 0
.uop uops 13 0 0
.uop uops 14 1 0
.uop uops 15 1 0
.uop uops 16 1 0
.uop uops 17 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=32 stride=32
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=2 stride=2
GEMM reset uop=0:8 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=1 x=7 stride=7 | push_next
GEMM uop=0:8 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev push_prev
ALU.SHR uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=8:16 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=2 x=4 stride=16 | pop_prev push_prev
GEMM reset uop=16:24 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=7 dram=data+16 y=1 x=7 stride=7 | push_next
GEMM uop=16:24 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev push_prev
ALU.SHR uop=16:24 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=24:32 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=16:24 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=16:24 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=10 dram=res+4 y=2 x=4 stride=16 | pop_prev push_prev
GEMM reset uop=0:8 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=0 dram=data+32 y=1 x=7 stride=7 | pop_next push_next
GEMM uop=0:8 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
ALU.SHR uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=8:16 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:8 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+8 y=2 x=4 stride=16 | pop_prev
GEMM reset uop=16:24 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=7 dram=data+48 y=1 x=7 stride=7 | pop_next push_next
GEMM uop=16:24 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
ALU.SHR uop=16:24 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=24:32 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=16:24 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=16:24 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=10 dram=res+12 y=2 x=4 stride=16 | pop_prev
FINISH
