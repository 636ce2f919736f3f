"""Running a suite: `runner bench` case by case in worker processes, the GPU side of one case, the
result document, `runner check` and the program Nsight Compute profiles."""
