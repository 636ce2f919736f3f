"""The verdict table of the GPU integrity tests (cheat | front end | verdict | message): every
module that records rows (test_cheats_gpu.record) leaves them in cheats-<module>.md, and each
pytest session appends its rows to cheats-all.md, under $KERNELGAP_TEST_ARTIFACTS. A table kept
by one module was overwritten by the next that shared it, and lost the rows recorded after it."""

from __future__ import annotations

import pytest

from tests.integrity.test_cheats_gpu import TABLE, artifacts, table_text, write_table


def table_name(module: str) -> str:
    """test_cheats_gpu -> cheats.md, test_cheats_state_gpu -> cheats-state.md,
    test_honest_third_gpu -> cheats-honest-third.md."""
    stem = module.rsplit(".", 1)[-1].removeprefix("test_").removesuffix("_gpu").replace("_", "-")
    return f"{stem if stem.startswith('cheats') else 'cheats-' + stem}.md"


@pytest.fixture(scope="module", autouse=True)
def module_verdicts(request):
    first = len(TABLE)
    yield
    write_table(TABLE[first:], table_name(request.module.__name__))


@pytest.fixture(scope="session", autouse=True)
def session_verdicts():
    first = len(TABLE)
    yield
    keep = artifacts()
    if keep is not None and len(TABLE) > first:
        with (keep / "cheats-all.md").open("a") as out:
            out.write(table_text(TABLE[first:]))
