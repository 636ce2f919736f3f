"""runner.definition.sweep and the lock: a case's axes expand to stable, readable points; bad
axes are refused naming case, axis and value; the lock takes new points without a new version
and refuses a changed one."""

from __future__ import annotations

import dataclasses

import pytest

from runner.definition import lock, manifest, sweep
from runner.errors import LockError, ManifestError
from tests.runner.definition.test_manifest import rejection, write_suite

DIMS = "dims = { n = 1000 }"


def swept(tmp_path, axes: str, dims: str = "dims = { n = 1048576 }"):
    """The minimal suite with `axes` (TOML lines after dims) and `dims`."""
    return write_suite(tmp_path, DIMS, f"{dims}\n{axes}")


def test_format_value_writes_powers_of_two_as_2_to_the_k():
    assert [sweep.format_value(v) for v in (1, 2, 3, 4, 1 << 20, 1000, 3 << 10)] == [
        "1",
        "2",
        "3",
        "2^2",
        "2^20",
        "1000",
        "3072",
    ]
    assert sweep.point_id({"rows": 32, "cols": 64}) == "rows=2^5,cols=2^6"


def test_range_axis_expands_in_order_and_the_largest_is_the_headline(tmp_path):
    path = swept(tmp_path, 'axes = { n = { from = "2^10", to = "2^20", step = "x4" } }')
    case = manifest.load(path).case("scale")
    ids = [p.id for p in case.sweep.points]
    assert ids == ["n=2^10", "n=2^12", "n=2^14", "n=2^16", "n=2^18", "n=2^20"]
    assert case.sweep.headline == "n=2^20"
    assert case.sweep.point("n=2^12").dims == {"n": 4096}


def test_ids_are_stable_when_points_are_added(tmp_path):
    few = manifest.load(swept(tmp_path, 'axes = { n = ["2^12", "2^20"] }')).case("scale")
    more = manifest.load(swept(tmp_path, 'axes = { n = ["2^10", "2^12", 5000, "2^20"] }')).case(
        "scale"
    )
    assert [p.id for p in few.sweep.points] == ["n=2^12", "n=2^20"]
    assert [p.id for p in more.sweep.points] == ["n=2^10", "n=2^12", "n=5000", "n=2^20"]
    assert lock.point_hashes(few)["n=2^12"] == lock.point_hashes(more)["n=2^12"]


def test_several_axes_give_their_product_first_axis_outermost(tmp_path):
    path = write_suite(
        tmp_path,
        "dims = { n = 1000 }\ncheck_dims = { n = 17 }",
        'dims = { n = 1024, m = 8 }\ncheck_dims = { n = 17, m = 1 }\naxes = { n = [256, 1024], m = ["2^2", "2^3"] }',
    )
    case = manifest.load(path).case("scale")
    assert [p.id for p in case.sweep.points] == [
        "n=2^8,m=2^2",
        "n=2^8,m=2^3",
        "n=2^10,m=2^2",
        "n=2^10,m=2^3",
    ]
    assert case.sweep.headline == "n=2^10,m=2^3"


def test_explicit_points_and_a_declared_headline(tmp_path):
    path = write_suite(
        tmp_path,
        DIMS,
        'dims = { n = 1000 }\npoints = [ { n = 64 }, { n = 1000 }, { n = "2^12" } ]\n'
        'headline = "n=1000"',
    )
    case = manifest.load(path).case("scale")
    assert [p.id for p in case.sweep.points] == ["n=2^6", "n=1000", "n=2^12"]
    assert case.sweep.headline == "n=1000"


def test_a_small_point_is_gated_at_itself_a_large_one_at_check_dims(tmp_path):
    path = swept(tmp_path, 'axes = { n = ["2^4", "2^17", "2^18"] }', "dims = { n = 262144 }")
    case = manifest.load(path).case("scale")
    small, mid, large = case.sweep.points
    assert small.check_dims == {"n": 16}  # under the check size: at itself
    assert mid.check_dims == {"n": 1 << 17}  # 1 MiB of buffers (two f32): SMALL_POINT_BYTES
    assert large.check_dims == {"n": 17}  # past both: at check_dims
    at = sweep.at_point(case, "n=2^4")
    assert (at.dims, at.check_dims, at.id) == ({"n": 16}, {"n": 16}, "scale")
    assert sweep.at_point(case, None) is case


def test_headline_must_be_the_cases_dims(tmp_path):
    message = rejection(swept(tmp_path, 'axes = { n = ["2^10", "2^22"] }'))
    assert "case 'scale': dims: the headline point n=2^22 (the largest, by default)" in message
    assert 'declare headline = "<point id>"' in message


@pytest.mark.parametrize(
    ("axes", "expected"),
    [
        ("axes = { k = [1, 2] }", "axes.k: not a dimension of the case (dims: n)"),
        ("axes = { n = [0, 1024] }", "axes.n[0]"),
        ('axes = { n = ["two", 1024] }', "axes.n[0]"),
        ("axes = { n = [1024, 1024] }", "point n=2^10 is given twice"),
        (
            'axes = { n = { from = "2^10", to = "2^19", step = "x4" } }',
            "axes.n: from 2^10 in steps of x4 does not land on to = 2^19",
        ),
        ('axes = { n = { from = 1, to = 8, step = "x1" } }', "axes.n.step: 'x1' is not a step"),
        ('axes = { n = ["2^50"] }\nheadline = "n=2^50"', "at point scale[n=2^50]"),
        ('axes = { n = [1024] }\nheadline = "n=7"', "headline: 'n=7' is not one of the points"),
        ("points = [ { n = 1 } ]\naxes = { n = [1] }", "give either axes"),
        ("points = [ { n = 1 }, { m = 2 } ]", "points[1]: names m"),
    ],
)
def test_bad_axes_are_refused_naming_case_axis_and_value(tmp_path, axes, expected):
    message = rejection(swept(tmp_path, axes, "dims = { n = 1024 }"))
    assert "case 'scale'" in message and expected in message, message


def test_too_many_points_are_refused(tmp_path):
    message = rejection(swept(tmp_path, 'axes = { n = { from = 1, to = 65, step = "+1" } }'))
    assert "65 points; a sweep has at most 64" in message


def test_a_headline_without_a_sweep_is_refused(tmp_path):
    message = rejection(write_suite(tmp_path, DIMS, f'{DIMS}\nheadline = "n=1000"'))
    assert "headline: a case without axes or points has none" in message


def test_at_point_names_the_points_it_has(tmp_path):
    case = manifest.load(swept(tmp_path, 'axes = { n = ["2^12", "2^20"] }')).case("scale")
    with pytest.raises(ManifestError, match=r"no point 'n=3' \(points: n=2\^12, n=2\^20\)"):
        sweep.at_point(case, "n=3")


def test_lock_takes_new_points_without_a_version_and_refuses_a_changed_one(tmp_path):
    path = swept(tmp_path, 'axes = { n = ["2^12", "2^20"] }')
    assert lock.record(manifest.load(path)) == [("scale", 1)]
    text = lock.lock_path(manifest.load(path)).read_text()
    assert 'points = { "n=2^12" = "' in text
    assert lock.verify(manifest.load(path)) == []
    # a new point: recorded under the same version, no bump
    path = swept(tmp_path, 'axes = { n = ["2^4", "2^12", "2^20"] }')
    problems = lock.verify(manifest.load(path))
    assert (
        len(problems) == 1
        and "points n=2^4 are not recorded (no new version needed)" in problems[0]
    )
    assert lock.record(manifest.load(path)) == [("scale", 1)]
    assert lock.verify(manifest.load(path)) == []
    # the same point id gated elsewhere: its meaning changed, a bump is needed
    suite = manifest.load(path)
    case = suite.case("scale")
    point = case.sweep.points[1]
    moved = sweep.Point(point.id, point.values, point.dims, {"n": 99})
    changed = sweep.Sweep(
        case.sweep.axes, (case.sweep.points[0], moved, case.sweep.points[2]), "n=2^20"
    )
    edited = dataclasses.replace(suite, cases=(dataclasses.replace(case, sweep=changed),))
    problems = lock.verify(edited)
    assert len(problems) == 1 and "point n=2^12 (its dims or where its gate runs)" in problems[0]
    assert "bump its version" in problems[0]
    with pytest.raises(LockError, match="point n=2\\^12"):
        lock.record(edited)


def test_a_sweep_keeps_the_cases_content_hash(tmp_path):
    plain = manifest.load(write_suite(tmp_path, DIMS, "dims = { n = 1048576 }"))
    with_axes = manifest.load(swept(tmp_path, 'axes = { n = ["2^12", "2^20"] }'))
    assert lock.content_sha256(plain, plain.case("scale")) == lock.content_sha256(
        with_axes, with_axes.case("scale")
    )
