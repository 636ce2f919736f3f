"""examples/ops on a machine that cannot run them skips with the reason instead of failing: without
torch, and with torch but no GPU driver (torch itself cannot be installed here: a stub module that
answers `torch.cuda.is_available()` with False stands in for a CPU-only torch)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

STUBS = {
    "torch.py": "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n",
    "triton/__init__.py": "def jit(kernel):\n    return kernel\n",
    "triton/language.py": "",
}


def examples(tmp_path, stubs: dict[str, str]) -> subprocess.CompletedProcess:
    stub_dir = tmp_path / "stubs"
    for name, text in stubs.items():
        (stub_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (stub_dir / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub_dir), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "examples/ops", "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    "stubs,reason,status,count",
    [  # 5: pytest's "no tests collected": without torch no test can be collected
        ({}, "the ops examples time torch: pip install '.[ops]'", 5, "1 skipped"),
        (STUBS, "no CUDA GPU and driver visible to torch: run the ops examples on a GPU box", 0, "14 skipped"),
    ],
    ids=["no torch", "torch without a driver"],
)  # fmt: skip
def test_the_ops_examples_skip_with_the_reason(tmp_path, stubs, reason, status, count):
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        if not stubs:
            pytest.skip("torch is installed here: the no-torch case cannot be shown")
    done = examples(tmp_path, stubs)
    assert done.returncode == status, done.stdout + done.stderr
    assert count in done.stdout and "failed" not in done.stdout and "error" not in done.stdout
    assert reason in done.stdout, done.stdout
