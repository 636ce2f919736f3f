"""schemas/result.schema.json and protocol.version against a real result document.

tests/fixtures/result-1.0.0-h200-axpy.json was written by `python -m runner bench` on an H200
(schema 1.0.0). It is a frozen fixture: it stays in the tests forever, unedited, so that every
later reader is proven to accept what 1.0.0 writers wrote. A new format gets a new fixture.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from protocol import RESULT_SCHEMA_VERSION, SCHEMA_DIR, check_version, decode
from protocol.errors import DocumentError, VersionError
from protocol.validation import errors, validate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "result-1.0.0-h200-axpy.json"
# sha256 of the frozen fixture: a failure here means it was edited; add a new fixture instead
FIXTURE_SHA256 = "b8fb0d3f7fd2ea75c702e1a7394113016dc5304b6d161749161ef4d597d15aec"


@pytest.fixture(scope="module")
def frozen() -> dict:
    return decode(FIXTURE.read_bytes(), what=str(FIXTURE))


def test_fixture_is_unedited():
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == FIXTURE_SHA256


def test_frozen_fixture_validates(frozen):
    validate(frozen, "result", str(FIXTURE))
    assert errors(frozen, "result") == []
    assert frozen["schema_version"] == "1.0.0" and frozen["kind"] == "kernelgap.result"
    check_version(frozen["schema_version"], RESULT_SCHEMA_VERSION, str(FIXTURE))
    # a real run: a checked case with a gap, on the GPU it names
    case = frozen["cases"][0]
    assert case["status"] == "ok" and frozen["environment"]["device"]["name"] == "NVIDIA H200"
    assert case["implementations"]["handptx"]["gap"]["ratio_of_medians"] > 0


@pytest.mark.parametrize("version", ["1.0.0", "1.0.7", "1.4.0", RESULT_SCHEMA_VERSION])
def test_check_version_accepts_major_1(version):
    check_version(version, "1.0.0", "result.json")


def test_check_version_refuses_a_newer_major():
    with pytest.raises(VersionError) as info:
        check_version("2.0.0", "1.0.0", "result.json")
    message = str(info.value)
    assert message.startswith("result.json: schema_version 2.0.0 is newer than")
    assert "1.0.0" in message and "upgrade" in message


def test_check_version_refuses_an_older_major():
    with pytest.raises(VersionError, match=r"result\.json: schema_version 0\.9\.0 is older"):
        check_version("0.9.0", "1.0.0", "result.json")


@pytest.mark.parametrize("garbage", ["garbage", "", "v1.0.0", "one.0.0", None])
def test_check_version_refuses_garbage(garbage):
    with pytest.raises(VersionError) as info:
        check_version(garbage, "1.0.0", "result.json")
    assert str(info.value) == f"result.json: schema_version {garbage!r} is not a semantic version"


def _case(doc: dict) -> dict:
    return doc["cases"][0]


def _candidate(doc: dict) -> dict:
    return _case(doc)["implementations"]["handptx"]


def _fail(doc: dict, **error) -> None:
    _case(doc).update(status="failed", error={"phase": "load", "message": "boom", **error})


# One row per mutation: a table reads better than one item per line, so the formatter skips it.
# fmt: off
MUTATIONS = [
    # (test id, mutation, field path in the message, words of the rule)
    ("no_schema_version", lambda d: d.pop("schema_version"), "(top level)",
     "'schema_version' is a required property"),
    ("newer_schema_version", lambda d: d.update(schema_version="2.0.0"), "schema_version",
     "'2.0.0' does not match"),
    ("wrong_kind", lambda d: d.update(kind="kernelgap.results"), "kind",
     "'kernelgap.result' was expected"),
    ("failed_without_error", lambda d: _case(d).update(status="failed"), "cases[0]",
     "'error' is a required property"),
    ("ok_with_error", lambda d: _case(d).update(error={"phase": "check", "message": "x"}),
     "cases[0]", "should not be valid under {'required': ['error']}"),
    ("unknown_error_phase", lambda d: _fail(d, phase="compile"), "cases[0].error.phase",
     "'compile' is not one of"),
    ("bad_cuda_error", lambda d: _fail(d, cuda_error="INVALID_VALUE"),
     "cases[0].error.cuda_error", "'INVALID_VALUE' does not match '^CUDA_ERROR_"),
    ("empty_error_message", lambda d: _fail(d, message=""), "cases[0].error.message",
     "should be non-empty"),
    ("stats_without_median", lambda d: _candidate(d)["timing"]["stats"].pop("median_s"),
     "cases[0].implementations.handptx.timing.stats", "'median_s' is a required property"),
    ("negative_sample", lambda d: _candidate(d)["timing"]["samples_s"].__setitem__(3, -1e-6),
     "cases[0].implementations.handptx.timing.samples_s[3]", "less than the minimum of 0"),
    ("no_samples", lambda d: _candidate(d)["timing"].update(samples_s=[]),
     "cases[0].implementations.handptx.timing.samples_s", "should be non-empty"),
    ("gap_ci_low_zero", lambda d: _candidate(d)["gap"].update(ci_low=0),
     "cases[0].implementations.handptx.gap.ci_low", "less than or equal to the minimum of 0"),
    ("suite_sha256_not_hex", lambda d: d["suite"].update(sha256="z" * 64), "suite.sha256",
     "does not match '^[0-9a-f]{64}$'"),
    ("source_sha256_upper_case",
     lambda d: _candidate(d)["build"].update(source_sha256="6005F6FB" * 8),
     "cases[0].implementations.handptx.build.source_sha256", "does not match '^[0-9a-f]{64}$'"),
    ("started_without_t_and_z", lambda d: d.update(started_utc="2026-11-29 12:01:04"),
     "started_utc", "does not match"),
    ("finished_with_offset", lambda d: d.update(finished_utc="2026-11-29T12:01:10+00:00"),
     "finished_utc", "does not match"),
    ("unknown_top_level_key", lambda d: d.update(extra=1), "(top level)",
     "('extra' was unexpected)"),
    ("reference_role", lambda d: _candidate(d).update(role="reference"),
     "cases[0].implementations.handptx.role", "'reference' is not one of ['baseline', 'candidate']"),
    ("grid_of_two", lambda d: _case(d)["launch"].update(grid=[4224, 1]), "cases[0].launch.grid",
     "is too short"),
    ("summary_negative_ok", lambda d: d["summary"].update(ok=-1), "summary.ok",
     "less than the minimum of 0"),
]
# fmt: on


@pytest.mark.parametrize(
    ("mutate", "where", "rule"),
    [pytest.param(mutate, where, rule, id=name) for name, mutate, where, rule in MUTATIONS],
)
def test_mutated_fixture_is_rejected_with_the_field_path(frozen, mutate, where, rule):
    doc = copy.deepcopy(frozen)
    mutate(doc)
    with pytest.raises(DocumentError) as info:
        validate(doc, "result", "result.json")
    message = str(info.value)
    assert message.startswith(
        f"result.json: does not match schemas/result.schema.json at {where}: "
    )
    assert rule in message, message
    # errors() lists the violation at that field or at the oneOf that holds it (gap, finished_utc)
    paths = [e.split(": ", 1)[0] for e in errors(doc, "result")]
    assert any(where == p or where.startswith((f"{p}.", f"{p}[")) for p in paths), paths


def test_mutations_do_not_touch_the_fixture(frozen):
    # the module-scoped fixture is shared: a mutation that leaked would break later tests
    assert orjson.dumps(frozen) == orjson.dumps(decode(FIXTURE.read_bytes()))


@pytest.mark.parametrize("path", sorted(SCHEMA_DIR.glob("*.schema.json")), ids=lambda p: p.name)
def test_every_schema_is_valid_draft_2020_12(path):
    schema = orjson.loads(path.read_bytes())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_the_schemas_folder_holds_the_documents_that_cross_a_boundary():
    names = {p.name for p in SCHEMA_DIR.glob("*.schema.json")}
    assert {"result.schema.json", "cases.schema.json"} <= names
