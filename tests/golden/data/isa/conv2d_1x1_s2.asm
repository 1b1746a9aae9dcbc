.alloc data inp 64
.alloc kernel wgt 2
.alloc bias acc 2
.alloc res out 32
.alloc uops uop 8
.uop uops 2 0 0
.uop uops 18 0 0
.uop uops 2 0 0
.uop uops 6 7 0
.uop uops 18 14 0
.uop uops 22 21 0
.uop uops 2 2 0
.uop uops 18 18 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=8 stride=8
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=2 stride=2
GEMM reset uop=0:1 iter=1,16 dst=0,1 src=0,0 wgt=0,0
GEMM reset uop=1:2 iter=1,16 dst=0,1 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=2 x=7 stride=16 | push_next
GEMM uop=2:4 iter=2,4 dst=8,1 src=0,2 wgt=1,0 | pop_prev
LOAD.INP sram=14 dram=data+32 y=2 x=7 stride=16 | push_next
GEMM uop=4:6 iter=2,4 dst=8,1 src=0,2 wgt=1,0 | pop_prev
ALU.SHR uop=6:7 iter=1,16 dst=0,1 src=0,1 imm=10
ALU.ADD uop=0:1 iter=2,8 dst=8,1 src=1,0
ALU.MAX uop=6:7 iter=1,16 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=6:7 iter=1,16 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=2 x=8 stride=16 | pop_prev
ALU.SHR uop=7:8 iter=1,16 dst=0,1 src=0,1 imm=10
ALU.ADD uop=1:2 iter=2,8 dst=8,1 src=1,0
ALU.MAX uop=7:8 iter=1,16 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=7:8 iter=1,16 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=18 dram=res+8 y=2 x=8 stride=16 | pop_prev
FINISH
