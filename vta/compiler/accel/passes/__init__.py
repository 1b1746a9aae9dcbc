"""The VTA lowering passes, one a file; ``vta.compiler.accel.pipeline`` lists them in order."""
