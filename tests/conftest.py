"""Shared test set-up: GPU tests carry the `gpu` marker and skip, with the reason, where no GPU is usable."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device is usable from this process, else why not (checked once)."""
    from runner.gpu import driver

    try:
        driver.init()
    except driver.NoGpuError as exc:
        return f"no usable NVIDIA GPU: {str(exc).split(';')[0]}"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(
                pytest.mark.skip(reason=f"{reason} (run `pytest -m gpu` on the GPU box)")
            )
