"""The VTA lowering passes, one a file; ``vta.compiler.pipeline`` lists them in order."""
