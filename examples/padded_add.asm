# A padded, strided load into acc and a register-register ALU.ADD (pynq): a 3x3 tile of a
# 4-wide DRAM matrix is loaded with one zero entry of padding on every side (5x5 = 25 entries),
# then every entry of the padded image is doubled (acc[i] += acc[i]) and stored as 5 rows.
.alloc M acc 16
.alloc P out 25
.alloc U uop 1
.uop U 0 0 0
LOAD.UOP  sram=0 dram=U+0 y=1 x=1 stride=1
LOAD.ACC  sram=0 dram=M+5 y=3 x=3 stride=4 pad=1,1,1,1
ALU.ADD   uop=0:1 iter=5,5 dst=5,1 src=5,1 | push_next
STORE.OUT sram=0 dram=P+0 y=5 x=5 stride=5 | pop_prev push_prev
FINISH | pop_next
