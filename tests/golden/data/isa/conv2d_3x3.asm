.alloc data inp 64
.alloc kernel wgt 18
.alloc bias acc 2
.alloc res out 128
.alloc uops uop 240
.uop uops 2 0 0
.uop uops 3 0 0
.uop uops 4 0 0
.uop uops 5 0 0
.uop uops 6 0 0
.uop uops 7 0 0
.uop uops 8 0 0
.uop uops 9 0 0
.uop uops 10 0 0
.uop uops 11 0 0
.uop uops 12 0 0
.uop uops 13 0 0
.uop uops 14 0 0
.uop uops 15 0 0
.uop uops 16 0 0
.uop uops 17 0 0
.uop uops 18 0 0
.uop uops 19 0 0
.uop uops 20 0 0
.uop uops 21 0 0
.uop uops 22 0 0
.uop uops 23 0 0
.uop uops 24 0 0
.uop uops 25 0 0
.uop uops 26 0 0
.uop uops 27 0 0
.uop uops 28 0 0
.uop uops 29 0 0
.uop uops 30 0 0
.uop uops 31 0 0
.uop uops 32 0 0
.uop uops 33 0 0
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
.uop uops 2 10 3
.uop uops 3 11 3
.uop uops 4 12 3
.uop uops 5 13 3
.uop uops 6 14 3
.uop uops 7 15 3
.uop uops 8 16 3
.uop uops 9 17 3
.uop uops 2 11 4
.uop uops 3 12 4
.uop uops 4 13 4
.uop uops 5 14 4
.uop uops 6 15 4
.uop uops 7 16 4
.uop uops 8 17 4
.uop uops 9 18 4
.uop uops 2 12 5
.uop uops 3 13 5
.uop uops 4 14 5
.uop uops 5 15 5
.uop uops 6 16 5
.uop uops 7 17 5
.uop uops 8 18 5
.uop uops 9 19 5
.uop uops 2 20 6
.uop uops 3 21 6
.uop uops 4 22 6
.uop uops 5 23 6
.uop uops 6 24 6
.uop uops 7 25 6
.uop uops 8 26 6
.uop uops 9 27 6
.uop uops 2 21 7
.uop uops 3 22 7
.uop uops 4 23 7
.uop uops 5 24 7
.uop uops 6 25 7
.uop uops 7 26 7
.uop uops 8 27 7
.uop uops 9 28 7
.uop uops 2 22 8
.uop uops 3 23 8
.uop uops 4 24 8
.uop uops 5 25 8
.uop uops 6 26 8
.uop uops 7 27 8
.uop uops 8 28 8
.uop uops 9 29 8
.uop uops 34 0 0
.uop uops 35 0 0
.uop uops 36 0 0
.uop uops 37 0 0
.uop uops 38 0 0
.uop uops 39 0 0
.uop uops 40 0 0
.uop uops 41 0 0
.uop uops 42 0 0
.uop uops 43 0 0
.uop uops 44 0 0
.uop uops 45 0 0
.uop uops 46 0 0
.uop uops 47 0 0
.uop uops 48 0 0
.uop uops 49 0 0
.uop uops 50 0 0
.uop uops 51 0 0
.uop uops 52 0 0
.uop uops 53 0 0
.uop uops 54 0 0
.uop uops 55 0 0
.uop uops 56 0 0
.uop uops 57 0 0
.uop uops 58 0 0
.uop uops 59 0 0
.uop uops 60 0 0
.uop uops 61 0 0
.uop uops 62 0 0
.uop uops 63 0 0
.uop uops 64 0 0
.uop uops 65 0 0
.uop uops 34 60 9
.uop uops 35 61 9
.uop uops 36 62 9
.uop uops 37 63 9
.uop uops 38 64 9
.uop uops 39 65 9
.uop uops 40 66 9
.uop uops 41 67 9
.uop uops 34 61 10
.uop uops 35 62 10
.uop uops 36 63 10
.uop uops 37 64 10
.uop uops 38 65 10
.uop uops 39 66 10
.uop uops 40 67 10
.uop uops 41 68 10
.uop uops 34 62 11
.uop uops 35 63 11
.uop uops 36 64 11
.uop uops 37 65 11
.uop uops 38 66 11
.uop uops 39 67 11
.uop uops 40 68 11
.uop uops 41 69 11
.uop uops 34 70 12
.uop uops 35 71 12
.uop uops 36 72 12
.uop uops 37 73 12
.uop uops 38 74 12
.uop uops 39 75 12
.uop uops 40 76 12
.uop uops 41 77 12
.uop uops 34 71 13
.uop uops 35 72 13
.uop uops 36 73 13
.uop uops 37 74 13
.uop uops 38 75 13
.uop uops 39 76 13
.uop uops 40 77 13
.uop uops 41 78 13
.uop uops 34 72 14
.uop uops 35 73 14
.uop uops 36 74 14
.uop uops 37 75 14
.uop uops 38 76 14
.uop uops 39 77 14
.uop uops 40 78 14
.uop uops 41 79 14
.uop uops 34 80 15
.uop uops 35 81 15
.uop uops 36 82 15
.uop uops 37 83 15
.uop uops 38 84 15
.uop uops 39 85 15
.uop uops 40 86 15
.uop uops 41 87 15
.uop uops 34 81 16
.uop uops 35 82 16
.uop uops 36 83 16
.uop uops 37 84 16
.uop uops 38 85 16
.uop uops 39 86 16
.uop uops 40 87 16
.uop uops 41 88 16
.uop uops 34 82 17
.uop uops 35 83 17
.uop uops 36 84 17
.uop uops 37 85 17
.uop uops 38 86 17
.uop uops 39 87 17
.uop uops 40 88 17
.uop uops 41 89 17
.uop uops 34 1 0
.uop uops 35 1 0
.uop uops 36 1 0
.uop uops 37 1 0
.uop uops 38 1 0
.uop uops 39 1 0
.uop uops 40 1 0
.uop uops 41 1 0
.uop uops 42 1 0
.uop uops 43 1 0
.uop uops 44 1 0
.uop uops 45 1 0
.uop uops 46 1 0
.uop uops 47 1 0
.uop uops 48 1 0
.uop uops 49 1 0
.uop uops 50 1 0
.uop uops 51 1 0
.uop uops 52 1 0
.uop uops 53 1 0
.uop uops 54 1 0
.uop uops 55 1 0
.uop uops 56 1 0
.uop uops 57 1 0
.uop uops 58 1 0
.uop uops 59 1 0
.uop uops 60 1 0
.uop uops 61 1 0
.uop uops 62 1 0
.uop uops 63 1 0
.uop uops 64 1 0
.uop uops 65 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=240 stride=240
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=9 stride=9
LOAD.WGT sram=9 dram=kernel+9 y=1 x=9 stride=9
GEMM reset uop=0:32 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=5 x=8 stride=8 pad=1,0,1,1 | push_next
GEMM uop=32:104 iter=2,2 dst=16,8 src=20,10 wgt=0,0 | pop_prev push_prev
ALU.SHR uop=0:32 iter=1,1 dst=0,0 src=0,0 imm=11
ALU.ADD uop=0:32 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:32 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:32 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=1 x=32 stride=32 | pop_prev push_prev
GEMM reset uop=104:136 iter=1,1 dst=0,0 src=0,0 wgt=0,0
LOAD.INP sram=60 dram=data+0 y=5 x=8 stride=8 pad=1,0,1,1 | push_next
GEMM uop=136:208 iter=2,2 dst=16,8 src=20,10 wgt=0,0 | pop_prev push_prev
ALU.SHR uop=104:136 iter=1,1 dst=0,0 src=0,0 imm=11
ALU.ADD uop=208:240 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=104:136 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=104:136 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=34 dram=res+64 y=1 x=32 stride=32 | pop_prev push_prev
GEMM reset uop=0:32 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=0 dram=data+24 y=5 x=8 stride=8 pad=0,1,1,1 | pop_next push_next
GEMM uop=32:104 iter=2,2 dst=16,8 src=20,10 wgt=0,0 | pop_prev
ALU.SHR uop=0:32 iter=1,1 dst=0,0 src=0,0 imm=11
ALU.ADD uop=0:32 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=0:32 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=0:32 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=2 dram=res+32 y=1 x=32 stride=32 | pop_prev
GEMM reset uop=104:136 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=60 dram=data+24 y=5 x=8 stride=8 pad=0,1,1,1 | pop_next push_next
GEMM uop=136:208 iter=2,2 dst=16,8 src=20,10 wgt=0,0 | pop_prev
ALU.SHR uop=104:136 iter=1,1 dst=0,0 src=0,0 imm=11
ALU.ADD uop=208:240 iter=1,1 dst=0,0 src=0,0
ALU.MAX uop=104:136 iter=1,1 dst=0,0 src=0,0 imm=-128
ALU.MIN uop=104:136 iter=1,1 dst=0,0 src=0,0 imm=127 | push_next
STORE.OUT sram=34 dram=res+96 y=1 x=32 stride=32 | pop_prev
FINISH
