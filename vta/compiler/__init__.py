"""The compiler: tensor IR, schedules, the loop-nest IR, passes and target pipelines."""
