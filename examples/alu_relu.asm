# ReLU with requantisation on 8 accumulator entries (pynq): out = clip(acc >> 4, 0, 127).
# ACC and UOP loads run on the compute unit; the store waits for the ALU through a token.
.alloc X acc 8
.alloc Y out 8
.alloc U uop 1
.uop U 0 0 0
LOAD.UOP  sram=0 dram=U+0 y=1 x=1 stride=1
LOAD.ACC  sram=0 dram=X+0 y=1 x=8 stride=8
ALU.SHR   uop=0:1 iter=8,1 dst=1,0 src=1,0 imm=4
ALU.MAX   uop=0:1 iter=8,1 dst=1,0 src=1,0 imm=0
ALU.MIN   uop=0:1 iter=8,1 dst=1,0 src=1,0 imm=127 | push_next
STORE.OUT sram=0 dram=Y+0 y=1 x=8 stride=8 | pop_prev push_prev
FINISH | pop_next
