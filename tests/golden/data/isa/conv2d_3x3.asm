.alloc data inp 64
.alloc kernel wgt 18
.alloc bias acc 2
.alloc res out 128
.alloc uops uop 208
.uop uops 2 0 0
.uop uops 4 0 0
.uop uops 6 0 0
.uop uops 8 0 0
.uop uops 10 0 0
.uop uops 12 0 0
.uop uops 14 0 0
.uop uops 16 0 0
.uop uops 18 0 0
.uop uops 20 0 0
.uop uops 22 0 0
.uop uops 24 0 0
.uop uops 26 0 0
.uop uops 28 0 0
.uop uops 30 0 0
.uop uops 32 0 0
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
.uop uops 34 0 0
.uop uops 36 0 0
.uop uops 38 0 0
.uop uops 40 0 0
.uop uops 42 0 0
.uop uops 44 0 0
.uop uops 46 0 0
.uop uops 48 0 0
.uop uops 50 0 0
.uop uops 52 0 0
.uop uops 54 0 0
.uop uops 56 0 0
.uop uops 58 0 0
.uop uops 60 0 0
.uop uops 62 0 0
.uop uops 64 0 0
.uop uops 34 40 0
.uop uops 35 41 0
.uop uops 36 42 0
.uop uops 37 43 0
.uop uops 38 44 0
.uop uops 39 45 0
.uop uops 40 46 0
.uop uops 41 47 0
.uop uops 34 41 1
.uop uops 35 42 1
.uop uops 36 43 1
.uop uops 37 44 1
.uop uops 38 45 1
.uop uops 39 46 1
.uop uops 40 47 1
.uop uops 41 48 1
.uop uops 34 42 2
.uop uops 35 43 2
.uop uops 36 44 2
.uop uops 37 45 2
.uop uops 38 46 2
.uop uops 39 47 2
.uop uops 40 48 2
.uop uops 41 49 2
.uop uops 34 50 3
.uop uops 35 51 3
.uop uops 36 52 3
.uop uops 37 53 3
.uop uops 38 54 3
.uop uops 39 55 3
.uop uops 40 56 3
.uop uops 41 57 3
.uop uops 34 51 4
.uop uops 35 52 4
.uop uops 36 53 4
.uop uops 37 54 4
.uop uops 38 55 4
.uop uops 39 56 4
.uop uops 40 57 4
.uop uops 41 58 4
.uop uops 34 52 5
.uop uops 35 53 5
.uop uops 36 54 5
.uop uops 37 55 5
.uop uops 38 56 5
.uop uops 39 57 5
.uop uops 40 58 5
.uop uops 41 59 5
.uop uops 34 60 6
.uop uops 35 61 6
.uop uops 36 62 6
.uop uops 37 63 6
.uop uops 38 64 6
.uop uops 39 65 6
.uop uops 40 66 6
.uop uops 41 67 6
.uop uops 34 61 7
.uop uops 35 62 7
.uop uops 36 63 7
.uop uops 37 64 7
.uop uops 38 65 7
.uop uops 39 66 7
.uop uops 40 67 7
.uop uops 41 68 7
.uop uops 34 62 8
.uop uops 35 63 8
.uop uops 36 64 8
.uop uops 37 65 8
.uop uops 38 66 8
.uop uops 39 67 8
.uop uops 40 68 8
.uop uops 41 69 8
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
LOAD.UOP sram=0 dram=uops+0 y=1 x=208 stride=208
LOAD.ACC sram=0 dram=bias+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=kernel+0 y=1 x=18 stride=18
GEMM reset uop=0:16 iter=1,2 dst=0,1 src=0,0 wgt=0,0
LOAD.INP sram=0 dram=data+0 y=3 x=8 stride=8 pad=1,0,1,1 | push_next
GEMM uop=16:88 iter=2,2 dst=16,8 src=0,10 wgt=9,0 | pop_prev push_prev
ALU.SHR uop=0:16 iter=1,2 dst=0,1 src=0,1 imm=11
ALU.ADD uop=88:104 iter=1,2 dst=0,16 src=0,1
ALU.MAX uop=0:16 iter=1,2 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=0:16 iter=1,2 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=2 dram=res+0 y=2 x=16 stride=64 | pop_prev push_prev
GEMM reset uop=104:120 iter=1,2 dst=0,1 src=0,0 wgt=0,0
LOAD.INP sram=40 dram=data+8 y=4 x=8 stride=8 pad=0,0,1,1 | push_next
GEMM uop=120:192 iter=2,2 dst=16,8 src=0,10 wgt=9,0 | pop_prev push_prev
ALU.SHR uop=104:120 iter=1,2 dst=0,1 src=0,1 imm=11
ALU.ADD uop=192:208 iter=1,2 dst=0,16 src=0,1
ALU.MAX uop=104:120 iter=1,2 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=104:120 iter=1,2 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=34 dram=res+16 y=2 x=16 stride=64 | pop_prev push_prev
GEMM reset uop=0:16 iter=1,2 dst=0,1 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=0 dram=data+24 y=4 x=8 stride=8 pad=0,0,1,1 | pop_next push_next
GEMM uop=16:88 iter=2,2 dst=16,8 src=0,10 wgt=9,0 | pop_prev
ALU.SHR uop=0:16 iter=1,2 dst=0,1 src=0,1 imm=11
ALU.ADD uop=88:104 iter=1,2 dst=0,16 src=0,1
ALU.MAX uop=0:16 iter=1,2 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=0:16 iter=1,2 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=2 dram=res+32 y=2 x=16 stride=64 | pop_prev
GEMM reset uop=104:120 iter=1,2 dst=0,1 src=0,0 wgt=0,0 | pop_next
LOAD.INP sram=40 dram=data+40 y=3 x=8 stride=8 pad=0,1,1,1 | pop_next push_next
GEMM uop=120:192 iter=2,2 dst=16,8 src=0,10 wgt=9,0 | pop_prev
ALU.SHR uop=104:120 iter=1,2 dst=0,1 src=0,1 imm=11
ALU.ADD uop=192:208 iter=1,2 dst=0,16 src=0,1
ALU.MAX uop=104:120 iter=1,2 dst=0,1 src=0,1 imm=-128
ALU.MIN uop=104:120 iter=1,2 dst=0,1 src=0,1 imm=127 | push_next
STORE.OUT sram=34 dram=res+48 y=2 x=16 stride=64 | pop_prev
FINISH
