"""The gate: what must hold before and while a time counts, in one folder to audit.

correctness (every implementation checked before anything is timed; `runner check`'s null
models and input edges), elements (the element test both front ends share), null_models (one
set for both front ends), arrays (the Python API's array operations), timed_size (outputs compared at the timed size, the reference sampled
there), launch_audit (which cold launches are read back) and output_dependence (hot replays on
poisoned outputs). Any step says that a case (or one launch) failed in a phase with
runner.errors.PhaseError.
"""
