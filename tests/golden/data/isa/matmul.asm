.alloc data inp 32
.alloc kernel wgt 4
.alloc bias acc 2
.alloc res out 32
.alloc uops uop 6
.uop uops 2 0 0
.uop uops 18 0 0
.uop uops 18 32 2
.uop uops 2 2 0
.uop uops 18 18 0
.uop uops 18 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=6 stride=6
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=2 stride=2
LOAD.WGT sram=2 dram=kernel+2 y=1 x=2 stride=2
GEMM reset uop=0:1 iter=1,16 dst=0,1 src=0,0 wgt=0,0
GEMM reset uop=1:2 iter=1,16 dst=0,1 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=1 x=32 stride=32 | push_next
GEMM uop=0:1 iter=2,16 dst=0,1 src=1,2 wgt=1,0 | pop_prev
LOAD.INP sram=32 dram=data+0 y=1 x=32 stride=32 | push_next
GEMM uop=2:3 iter=2,16 dst=0,1 src=1,2 wgt=1,0 | pop_prev
ALU.SHR uop=3:4 iter=1,16 dst=0,1 src=0,1 imm=10
ALU.ADD uop=0:1 iter=1,16 dst=0,1 src=0,0
ALU.MAX uop=3:4 iter=1,16 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=3:4 iter=1,16 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=16 x=1 stride=2 | pop_prev
ALU.SHR uop=4:5 iter=1,16 dst=0,1 src=0,1 imm=10
ALU.ADD uop=5:6 iter=1,16 dst=0,1 src=0,0
ALU.MAX uop=4:5 iter=1,16 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=4:5 iter=1,16 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=18 dram=res+1 y=16 x=1 stride=2 | pop_prev
FINISH
