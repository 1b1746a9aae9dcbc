.alloc data inp 64
.alloc kernel wgt 2
.alloc bias acc 2
.alloc res out 32
.alloc uops uop 64
.uop uops 2 0 0
.uop uops 3 2 0
.uop uops 4 4 0
.uop uops 5 6 0
.uop uops 6 7 0
.uop uops 7 9 0
.uop uops 8 11 0
.uop uops 9 13 0
.uop uops 10 0 1
.uop uops 11 2 1
.uop uops 12 4 1
.uop uops 13 6 1
.uop uops 14 7 1
.uop uops 15 9 1
.uop uops 16 11 1
.uop uops 17 13 1
.uop uops 2 0 0
.uop uops 3 0 0
.uop uops 4 0 0
.uop uops 5 0 0
.uop uops 6 0 0
.uop uops 7 0 0
.uop uops 8 0 0
.uop uops 9 0 0
.uop uops 10 1 0
.uop uops 11 1 0
.uop uops 12 1 0
.uop uops 13 1 0
.uop uops 14 1 0
.uop uops 15 1 0
.uop uops 16 1 0
.uop uops 17 1 0
.uop uops 18 14 0
.uop uops 19 16 0
.uop uops 20 18 0
.uop uops 21 20 0
.uop uops 22 21 0
.uop uops 23 23 0
.uop uops 24 25 0
.uop uops 25 27 0
.uop uops 26 14 1
.uop uops 27 16 1
.uop uops 28 18 1
.uop uops 29 20 1
.uop uops 30 21 1
.uop uops 31 23 1
.uop uops 32 25 1
.uop uops 33 27 1
.uop uops 18 0 0
.uop uops 19 0 0
.uop uops 20 0 0
.uop uops 21 0 0
.uop uops 22 0 0
.uop uops 23 0 0
.uop uops 24 0 0
.uop uops 25 0 0
.uop uops 26 1 0
.uop uops 27 1 0
.uop uops 28 1 0
.uop uops 29 1 0
.uop uops 30 1 0
.uop uops 31 1 0
.uop uops 32 1 0
.uop uops 33 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=64 stride=64
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=2 stride=2
GEMM reset uop=0:16 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=2 x=7 stride=16 | push_next
GEMM uop=0:16 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
ALU.SHR uop=0:16 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=16:32 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:16 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:16 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=2 x=8 stride=16 | pop_prev
GEMM reset uop=32:48 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=14 dram=data+32 y=2 x=7 stride=16 | push_next
GEMM uop=32:48 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
ALU.SHR uop=32:48 iter=1,1 dst=0,0 src=0,0 imm=10
ALU.ADD uop=48:64 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=32:48 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=32:48 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=18 dram=res+8 y=2 x=8 stride=16 | pop_prev
FINISH
