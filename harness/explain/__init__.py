"""`harness explain`: why a candidate is slower (or faster) than its baseline, from what the runner
recorded about each implementation: `static` (ptxas -v resources, SASS instruction mix, loops,
theoretical occupancy) and, from `runner bench --profile`, `profile` (Nsight Compute counters).

The harness never runs NVIDIA's tools or touches CUDA: it reads a result document or a bundle
manifest (runner build), through `sources`; `figures` lines the two implementations up with the
ratio of each figure; `findings` picks the differences that most plausibly explain the gap;
`report` writes markdown (a pull request, a job summary, the dashboard) or plain text.
"""
