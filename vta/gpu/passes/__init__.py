"""GPU lowering passes, one a file; ``vta.gpu.lower_gpu`` lists them in order."""
