# C[4x16] = A[4x16] . W[16x16]^T on a 1x16x16 core (pynq), low 8 bits of the int32 sums.
# Load A and W, reset the accumulators, one GEMM over the 4 rows, store, finish.
.alloc A inp 4
.alloc W wgt 1
.alloc C out 4
.alloc U uop 1
.uop U 0 0 0                                      # dst=acc 0, src=inp 0, wgt=0
LOAD.UOP  sram=0 dram=U+0 y=1 x=1 stride=1
LOAD.INP  sram=0 dram=A+0 y=1 x=4 stride=4
LOAD.WGT  sram=0 dram=W+0 y=1 x=1 stride=1 | push_next
GEMM reset uop=0:1 iter=4,1 dst=1,0 src=1,0 wgt=0,0 | pop_prev
GEMM       uop=0:1 iter=4,1 dst=1,0 src=1,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=C+0 y=1 x=4 stride=4 | pop_prev push_prev
FINISH | pop_next
