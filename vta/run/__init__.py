"""Running workloads on a target: compile, execute, compare with a reference, measure."""
