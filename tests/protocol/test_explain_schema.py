"""Result schema 1.3.0: optional `static` and `profile` blocks per implementation; documents of
1.0.0 and 1.2.0 stay valid and readable, and a block that is not what the runner writes is
refused with the field named."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from protocol import RESULT_SCHEMA_VERSION, load_result
from protocol.errors import DocumentError
from protocol.validation import validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STATIC_UNAVAILABLE = {"status": "unavailable", "reason": "cuobjdump not found"}
PROFILE_OK = {
    "status": "ok",
    "profiled": True,
    "tool": "ncu",
    "version": "Version 2025.3.1.0",
    "metrics": {"dram__bytes_read.sum": {"value": 1.0, "unit": "byte"}},
    "stalls": [{"reason": "wait", "metric": "m", "value": 2.0, "share": 0.5}],
}


def fixture(name: str) -> dict:
    return orjson.loads((FIXTURES / name).read_bytes())


def with_blocks(**blocks) -> dict:
    doc = copy.deepcopy(fixture("result-1.2.0-h200-warpforth.json"))
    doc["schema_version"] = RESULT_SCHEMA_VERSION
    doc["cases"][0]["implementations"]["warpforth"].update(blocks)
    return doc


def test_the_version_is_1_3_0_and_old_documents_still_load():
    # 1.3.0 added static and profile; 1.4.0 (issue 19) added revisions and pairs
    assert tuple(map(int, RESULT_SCHEMA_VERSION.split("."))) >= (1, 3, 0)
    for name in ("result-1.0.0-h200-axpy.json", "result-1.2.0-h200-warpforth.json"):
        load_result((FIXTURES / name).read_bytes(), name)


def test_static_and_profile_blocks_validate():
    validate(with_blocks(static=STATIC_UNAVAILABLE, profile=PROFILE_OK), "result")


@pytest.mark.parametrize(
    ("blocks", "field"),
    [
        ({"profile": {**PROFILE_OK, "profiled": False}}, "profile.profiled"),
        ({"profile": {k: v for k, v in PROFILE_OK.items() if k != "profiled"}}, "profile"),
        ({"profile": {"status": "failed", "profiled": True}}, "profile"),  # no reason
        ({"static": {"status": "ok", "arch": "sm_90"}}, "static"),  # no figures
        ({"static": {"status": "maybe", "reason": "x"}}, "static.status"),
    ],
)
def test_blocks_that_the_runner_never_writes_are_refused(blocks, field):
    with pytest.raises(DocumentError, match=field.replace(".", r"\.")):
        validate(with_blocks(**blocks), "result", "doc")
