.alloc data inp 64
.alloc kernel wgt 18
.alloc bias acc 2
.alloc res out 128
.alloc uops uop 53
.uop uops 2 0 0
.uop uops 66 0 0
.uop uops 2 0 0
.uop uops 3 1 0
.uop uops 4 2 0
.uop uops 5 3 0
.uop uops 6 4 0
.uop uops 7 5 0
.uop uops 8 6 0
.uop uops 9 7 0
.uop uops 2 1 1
.uop uops 3 2 1
.uop uops 4 3 1
.uop uops 5 4 1
.uop uops 6 5 1
.uop uops 7 6 1
.uop uops 8 7 1
.uop uops 9 8 1
.uop uops 2 2 2
.uop uops 3 3 2
.uop uops 4 4 2
.uop uops 5 5 2
.uop uops 6 6 2
.uop uops 7 7 2
.uop uops 8 8 2
.uop uops 9 9 2
.uop uops 66 100 9
.uop uops 67 101 9
.uop uops 68 102 9
.uop uops 69 103 9
.uop uops 70 104 9
.uop uops 71 105 9
.uop uops 72 106 9
.uop uops 73 107 9
.uop uops 66 101 10
.uop uops 67 102 10
.uop uops 68 103 10
.uop uops 69 104 10
.uop uops 70 105 10
.uop uops 71 106 10
.uop uops 72 107 10
.uop uops 73 108 10
.uop uops 66 102 11
.uop uops 67 103 11
.uop uops 68 104 11
.uop uops 69 105 11
.uop uops 70 106 11
.uop uops 71 107 11
.uop uops 72 108 11
.uop uops 73 109 11
.uop uops 2 2 0
.uop uops 66 66 0
.uop uops 66 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=53 stride=53
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=9 stride=9
LOAD.WGT sram=9 dram=kernel+9 y=1 x=9 stride=9
GEMM reset uop=0:1 iter=1,64 dst=0,1 src=0,0 wgt=0,0
GEMM reset uop=1:2 iter=1,64 dst=0,1 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=8 x=8 stride=8 pad=1,1,1,1 | push_next
GEMM uop=2:26 iter=8,3 dst=8,0 src=10,10 wgt=0,3 | pop_prev
LOAD.INP sram=100 dram=data+0 y=8 x=8 stride=8 pad=1,1,1,1 | push_next
GEMM uop=26:50 iter=8,3 dst=8,0 src=10,10 wgt=0,3 | pop_prev
ALU.SHR uop=50:51 iter=1,64 dst=0,1 src=0,1 imm=11
ALU.ADD uop=0:1 iter=1,64 dst=0,1 src=0,0
ALU.MAX uop=50:51 iter=1,64 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=50:51 iter=1,64 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=1 x=64 stride=64 | pop_prev
ALU.SHR uop=51:52 iter=1,64 dst=0,1 src=0,1 imm=11
ALU.ADD uop=52:53 iter=1,64 dst=0,1 src=0,0
ALU.MAX uop=51:52 iter=1,64 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=51:52 iter=1,64 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=66 dram=res+64 y=1 x=64 stride=64 | pop_prev
FINISH
