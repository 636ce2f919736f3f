"""The failures WarpForth's harness sees without a GPU through each runner switch: a bad
parameter type is refused before any launch, as a failure its parsing reports."""

from __future__ import annotations

import pytest

from tests.runner.launch.warpforth.conftest import KernelRunner, RunnerError


def test_a_bad_param_type_fails_through_each_switch(switch, service, tmp_path, runtime):
    request = {"ptx": ".version 7.0\n.target sm_70\n.address_size 64\n", "kernel": "main",
               "grid": [1], "block": [1], "params": [{"type": "i65[]", "values": [1]}],
               "outputs": [{"param": 0}]}  # fmt: skip
    with pytest.raises(RunnerError, match="i65"):
        KernelRunner(switch, tmp_path, service, runtime).run(request)
