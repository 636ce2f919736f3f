"""GPU: the launch limits `runner check` holds a manifest to (runner.definition.spec,
issue 33 item 14) are the device's own: its driver reports the same grid and block extents,
threads per block and opt-in shared memory per block for its architecture."""

from __future__ import annotations

import pytest

from runner.definition import spec
from runner.errors import LaunchLimitError

pytestmark = pytest.mark.gpu


def test_the_launch_limits_table_matches_the_device():
    from runner.gpu import driver

    with driver.Context(0) as ctx:
        grid = tuple(ctx.attribute(f"MAX_GRID_DIM_{axis}") for axis in "XYZ")
        block = tuple(ctx.attribute(f"MAX_BLOCK_DIM_{axis}") for axis in "XYZ")
        threads = ctx.attribute("MAX_THREADS_PER_BLOCK")
        shared = ctx.attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        arch = f"sm_{ctx.attribute('COMPUTE_CAPABILITY_MAJOR')}{ctx.attribute('COMPUTE_CAPABILITY_MINOR')}"
    print(f"{arch}: grid {grid}, block {block}, {threads} threads, {shared} B shared per block")
    assert grid == spec.MAX_GRID
    assert block == spec.MAX_BLOCK
    assert threads == spec.MAX_THREADS_PER_BLOCK
    limit, what = spec.shared_limit(arch)
    assert arch in what, f"{arch} is not in SHARED_BYTES_PER_BLOCK: add {shared} bytes"
    assert limit == shared, (arch, limit, shared)
    spec.check_launch(grid, (threads, 1, 1), shared, where="device", arch=arch)
    with pytest.raises(LaunchLimitError, match="shared_bytes"):
        spec.check_launch((1, 1, 1), (1, 1, 1), shared + 1, where="device", arch=arch)
