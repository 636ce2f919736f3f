"""Workers started ahead of their jobs (runner.execution.isolation): taken by the next job, one
job each, and ended at the end of a run."""

from __future__ import annotations

from runner.execution import isolation


def test_a_worker_started_ahead_runs_the_next_job_alone_and_the_rest_are_ended():
    isolation.keep_ahead()
    first = isolation.run_worker({"job": "nonsense"}, timeout_s=60, echo_stderr=False)
    waiting = [proc for proc, _ in isolation._Waiting.started]
    assert len(waiting) == 1 and waiting[0].poll() is None  # importing or waiting on stdin
    second = isolation.run_worker({"job": "other"}, timeout_s=60, echo_stderr=False)
    assert waiting[0].returncode == 0  # it took the second job, and exited after it
    assert "nonsense" in first.record["error"]["message"]
    assert "other" in second.record["error"]["message"]
    left = [proc for proc, _ in isolation._Waiting.started]
    isolation.stop_ahead()
    assert isolation._Waiting.started == [] and left[0].returncode is not None
    assert not isolation._Waiting.enabled  # a later job starts none ahead
