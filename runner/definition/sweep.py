"""A case's sweep: the points it is measured at, from its `axes` (their product) or its `points`,
and from its `options` (one implementation built several ways, at the case's dims).

A point sets some of the case's dimensions (the axes); `dims` gives the rest and is the headline
point's size, so a case that gains a sweep keeps what its one number meant. A point's id names
its axis values in declared order, powers of two as 2^k (`n=2^20`, `rows=2^5,cols=2^5`): the id
is what the history keys on, so it must not change when other points are added. A point no
larger than the case's correctness size (or than SMALL_POINT_BYTES) is gated at its own size;
a larger one, and the headline (the case as it always was), at check_dims, then cross-checked
at its own size, as a case is.

An option axis (`[case.options]`: impl, axis, values, headline) is a point per value other than
the headline's: that implementation built with the value's extra `flags`, its `arch` or its
template's `vars`, at the case's dims, with id `axis=value` (`O=O1`), so its history series is
its own. The headline value is the implementation as declared: the case's own (headline) point.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from runner.definition import spec
from runner.definition.spec import CaseSpec, buffer_bytes, resolve
from runner.errors import ExprError, ManifestError

__all__ = [
    "MAX_POINTS",
    "SMALL_POINT_BYTES",
    "OptionAxis",
    "Point",
    "Sweep",
    "at_point",
    "format_value",
    "parse_sweep",
    "point_id",
]

MAX_POINTS = 64  # a sweep is a curve of a few dozen sizes, not a grid search
# a point whose buffers total at most this (or at most the check size's) is gated at itself:
# the numpy reference over a megabyte takes milliseconds
SMALL_POINT_BYTES = 1 << 20
_STEP = re.compile(r"^([x+])([1-9][0-9]*)$")


@dataclass(frozen=True)
class Point:
    id: str  # "n=2^20": the axis values in declared order
    values: dict  # {axis: value}
    dims: dict  # the case's dims with the axis values in
    check_dims: dict  # where its gate runs: dims when the point is small, else the case's
    option: str | None = None  # an option axis's value: its implementation is built that way
    build: dict | None = None  # that value's {"impl", "flags", "arch", "vars"} (the lock's too)


@dataclass(frozen=True)
class OptionAxis:
    """One implementation built several ways: value -> {"flags": [...], "arch": ..., "vars":
    {...}} (each optional); `headline` is the value that is the implementation as declared."""

    axis: str
    impl: str
    values: dict
    headline: str

    def point_id(self, value: str) -> str:
        return f"{self.axis}={value}"

    def block(self) -> dict:
        """What the result document says of the axis (the case block's `options`)."""
        return {"axis": self.axis, "impl": self.impl, "headline": self.headline,
                "values": self.values}  # fmt: skip


@dataclass(frozen=True)
class Sweep:
    axes: tuple[str, ...]
    points: tuple[Point, ...]  # in declared order
    headline: str  # the id of the point whose dims are the case's `dims`
    options: OptionAxis | None = None

    def point(self, pid: str) -> Point:
        for p in self.points:
            if p.id == pid:
                return p
        raise KeyError(pid)


def format_value(value: int) -> str:
    """2^k for a power of two from 2^2 (4 and up), else decimal: 1048576 -> "2^20", 3 -> "3"."""
    if value >= 4 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    return str(value)


def point_id(values: dict) -> str:
    """The point's id: `axis=value` pairs in the order given, joined by commas."""
    return ",".join(f"{axis}={format_value(v)}" for axis, v in values.items())


def _value(raw, where: str) -> int:
    """An axis value: a positive integer, or text such as "2^20" or "3 * 2^10"."""
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ManifestError(f'{where}: expected an integer or text such as "2^20", got {raw!r}')
    text = raw.replace("^", "**") if isinstance(raw, str) else raw
    try:
        return spec.evaluate_int(text, {}, where=where, minimum=1)
    except ExprError as exc:
        raise ManifestError(str(exc)) from None


def _axis_values(raw, where: str) -> list[int]:
    """An axis's values: a list, or a range { from, to, step } with step "x4" (times 4) or
    "+64" (plus 64), which must land on `to` exactly."""
    if isinstance(raw, list):
        return [_value(v, f"{where}[{i}]") for i, v in enumerate(raw)]
    low, high = _value(raw["from"], f"{where}.from"), _value(raw["to"], f"{where}.to")
    found = _STEP.match(str(raw["step"]))
    if not found or (found[1] == "x" and int(found[2]) < 2):
        raise ManifestError(
            f'{where}.step: {raw["step"]!r} is not a step; write "x4" (times 4) or "+64" (plus 64)'
        )
    values, factor = [low], int(found[2])
    while values[-1] < high and len(values) <= MAX_POINTS:
        values.append(values[-1] * factor if found[1] == "x" else values[-1] + factor)
    if values[-1] != high:
        raise ManifestError(
            f"{where}: from {format_value(low)} in steps of {raw['step']} does not land on "
            f"to = {format_value(high)} (it passes {format_value(values[-2])}, then "
            f"{format_value(values[-1])}); choose from or to on the step"
        )
    return values


def _combinations(raw: dict, case: CaseSpec) -> tuple[tuple[str, ...], list[dict]]:
    """(axes, the value of each axis per point) from `axes` (their product, the first axis
    outermost) or `points` (an explicit list)."""
    w = case.where
    if ("axes" in raw) == ("points" in raw):
        raise ManifestError(f"{w}: give either axes (their product) or points (a list), not both")
    if "axes" in raw:
        axes = tuple(raw["axes"])
        combos = [{}]
        for axis in axes:
            values = _axis_values(raw["axes"][axis], f"{w}: axes.{axis}")
            combos = [{**c, axis: v} for c in combos for v in values]
        return axes, combos
    axes = tuple(raw["points"][0])
    combos = []
    for i, p in enumerate(raw["points"]):
        if tuple(p) != axes:
            raise ManifestError(
                f"{w}: points[{i}]: names {', '.join(p)}; every point must name the same "
                f"dimensions in the same order as points[0] ({', '.join(axes)})"
            )
        combos.append({a: _value(v, f"{w}: points[{i}].{a}") for a, v in p.items()})
    return axes, combos


def _point(case: CaseSpec, values: dict, check_bytes: int) -> Point:
    """The point at `values`: its dims resolved (every expression evaluates, sizes and launch
    limits hold, as at dims) and where its gate runs."""
    dims = {**case.dims, **values}
    pid = point_id(values)
    try:
        geometry = resolve(case, dims)
    except ManifestError as exc:
        raise ManifestError(f"{exc} (at point {case.id}[{pid}])") from None
    small = sum(buffer_bytes(case, geometry.lengths).values()) <= max(
        check_bytes, SMALL_POINT_BYTES
    )
    return Point(pid, values, dims, dims if small else dict(case.check_dims))


def parse_sweep(raw: dict, case: CaseSpec) -> Sweep | None:
    """The case's sweep from its manifest table (None without axes, points or options),
    validated: every axis a dimension of `dims`, points distinct and at most MAX_POINTS, the
    headline point (declared, else the largest: most bytes in its buffers, the last of equals)
    at `dims`; then a point per option value other than the option axis's headline."""
    options = _option_axis(raw.get("options"), case)
    if "axes" not in raw and "points" not in raw:
        if "headline" in raw:
            raise ManifestError(f"{case.where}: headline: a case without axes or points has none")
        if options is None:
            return None
        head = Point(options.point_id(options.headline), {}, dict(case.dims), dict(case.check_dims))
        return Sweep((options.axis,), (head, *_option_points(options, case)), head.id, options)
    sweep = _dims_sweep(raw, case)
    if options is None:
        return sweep
    if options.axis in sweep.axes:
        raise ManifestError(f"{case.where}: options.axis: {options.axis!r} is a dims axis too")
    points = (*sweep.points, *_option_points(options, case))
    if len(points) > MAX_POINTS:
        raise ManifestError(
            f"{case.where}: axes and options: {len(points)} points; a sweep has at most {MAX_POINTS}"
        )
    return Sweep((*sweep.axes, options.axis), points, sweep.headline, options)


def _option_points(options: OptionAxis, case: CaseSpec) -> list[Point]:
    """A point per option value but the headline's, at the case's dims, gated as the case is."""
    return [
        Point(options.point_id(value), {}, dict(case.dims), dict(case.check_dims), value,
              {"impl": options.impl, **change})
        for value, change in options.values.items()
        if value != options.headline
    ]  # fmt: skip


def _option_axis(raw: dict | None, case: CaseSpec) -> OptionAxis | None:
    """The case's `options` table checked: an implementation of the case, an axis name that is
    no dimension, values that are flags, an arch or the template's declared variables, and a
    headline value that changes nothing (the implementation as declared)."""
    if raw is None:
        return None
    w = f"{case.where}: options"
    names = {i.name: i for i in case.impls}
    if raw["impl"] not in names:
        raise ManifestError(
            f"{w}.impl: no implementation {raw['impl']!r} (implementations: {', '.join(names)})"
        )
    impl = names[raw["impl"]]
    if raw["axis"] in case.dims:
        raise ManifestError(f"{w}.axis: {raw['axis']!r} is a dimension of the case; name it apart")
    declared = dict(impl.variables)
    for value, change in raw["values"].items():  # the schema has checked flags and arch
        for name in change.get("vars", {}):
            if name not in declared:
                known = ", ".join(declared) or "none"
                raise ManifestError(
                    f"{w}.values.{value}.vars.{name}: not a variable implementation "
                    f"{impl.name!r} declares (its vars: {known})"
                )
    if raw["headline"] not in raw["values"]:
        raise ManifestError(
            f"{w}.headline: {raw['headline']!r} is not one of the values ({', '.join(raw['values'])})"
        )
    if raw["values"][raw["headline"]]:
        raise ManifestError(
            f"{w}.values.{raw['headline']}: the headline value is implementation {impl.name!r} "
            "as declared; give it no flags, arch or vars (`{}`)"
        )
    return OptionAxis(raw["axis"], impl.name, dict(raw["values"]), raw["headline"])


def _dims_sweep(raw: dict, case: CaseSpec) -> Sweep:
    """The sweep of the case's dims (`axes` or `points`), its headline at `dims`."""
    w = case.where
    axes, combos = _combinations(raw, case)
    for axis in axes:
        if axis not in case.dims:
            raise ManifestError(
                f"{w}: axes.{axis}: not a dimension of the case (dims: {', '.join(case.dims)}); "
                "an axis sets one of dims"
            )
    if len(combos) > MAX_POINTS:
        raise ManifestError(f"{w}: axes: {len(combos)} points; a sweep has at most {MAX_POINTS}")
    check = resolve(case, case.check_dims)
    check_bytes = sum(buffer_bytes(case, check.lengths).values())
    points, seen = [], set()
    for values in combos:
        point = _point(case, values, check_bytes)
        if point.id in seen:
            raise ManifestError(f"{w}: point {point.id} is given twice")
        seen.add(point.id)
        points.append(point)
    headline = _headline(raw.get("headline"), points, case)
    # the headline is the case as it has always been measured, its gate at check_dims included
    points = [
        dataclasses.replace(p, check_dims=dict(case.check_dims)) if p.id == headline else p
        for p in points
    ]
    return Sweep(axes, tuple(points), headline)


def _headline(declared: str | None, points: list[Point], case: CaseSpec) -> str:
    w = case.where
    if declared is not None:
        if declared not in {p.id for p in points}:
            raise ManifestError(
                f"{w}: headline: {declared!r} is not one of the points "
                f"({', '.join(p.id for p in points)})"
            )
        chosen = next(p for p in points if p.id == declared)
    else:
        chosen = max(
            enumerate(points),
            key=lambda ip: (
                sum(buffer_bytes(case, resolve(case, ip[1].dims).lengths).values()),
                ip[0],
            ),
        )[1]
    if chosen.dims != case.dims:
        axes = ", ".join(f"{a}={format_value(case.dims[a])}" for a in chosen.values)
        raise ManifestError(
            f"{w}: dims: the headline point {chosen.id} "
            f"({'declared' if declared else 'the largest, by default'}) must be the case's dims "
            f"({axes}): dims is the size the case's single number has always meant; declare "
            'headline = "<point id>" for the point at dims'
        )
    return chosen.id


def at_point(case: CaseSpec, pid: str | None) -> CaseSpec:
    """The case measured at point `pid` (its dims and gate size, and an option point's
    implementation built its way); the case itself for None."""
    if pid is None:
        return case
    if case.sweep is None:
        raise ManifestError(f"{case.where}: has no points (asked for point {pid!r})")
    try:
        point = case.sweep.point(pid)
    except KeyError:
        raise ManifestError(
            f"{case.where}: no point {pid!r} (points: {', '.join(p.id for p in case.sweep.points)})"
        ) from None
    impls = case.impls
    if point.option is not None:
        impls = tuple(_built_as(i, point) if i.name == point.build["impl"] else i for i in impls)
    return dataclasses.replace(
        case, dims=dict(point.dims), check_dims=dict(point.check_dims), impls=impls
    )


def _built_as(impl, point: Point):
    """`impl` as an option point builds it: its flags then the value's, the value's arch, its
    declared variables with the value's."""
    change = point.build
    variables = {**dict(impl.variables), **change.get("vars", {})}
    return dataclasses.replace(
        impl,
        flags=(*impl.flags, *change.get("flags", ())),
        arch=change.get("arch", impl.arch),
        variables=tuple(variables.items()),
        option=point.option,
    )
