"""Why one implementation is slower than another: what NVIDIA's own tools say about each one.

Static (any machine, no GPU): `ptxas -v` resource usage, the SASS instruction mix from
`cuobjdump -sass` (or `nvdisasm`), loops, and the theoretical occupancy (runner.explain.static).
Dynamic (the GPU box, `runner bench --profile`): Nsight Compute counters of one launch of each
implementation at the timed size, outside the timed samples (runner.explain.profiling).
Only the tools' text output is parsed, never a binary. The harness reads what is recorded here
from the result document (or a bundle) and never runs any of it.
"""
