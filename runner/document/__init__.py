"""The one place that turns measurements into a result document, for both front ends.

`runner bench` (runner.execution.result, from a worker's raw record) and `runner.bench` (the
Python API, runner.bench.report, from its measurement objects) fill their cases with these
blocks: a row's timing and rates (timing_block, rates), its gap against the baseline (gaps), the
clocks' verdict on a case (clocks) and the run's document with its summary (run). Everything is
computed from raw samples by runner.measurement's pure functions, so a document can always be
recomputed from itself; what differs between the front ends stays in them.
"""
