"""The suite manifest (`benchmarks/cases.toml`): parsing and validation into runner.definition.spec's model.

The TOML is validated against `schemas/cases.schema.json` first (unknown keys, missing
fields, bad types), then checked for what a schema cannot say: buffer references, files
that must exist, one baseline per case, expressions that must evaluate. Every message
names the file, the case id and the field, and says what was expected.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from protocol.errors import InputFileError
from protocol.input_files import read_toml
from protocol.validation import validator
from runner.definition.spec import (
    DEFAULT_SETTINGS,
    BufferSpec,
    CaseSpec,
    Distribution,
    ImplSpec,
    ParamSpec,
    Settings,
    Suite,
    full_range,
    inside_suite,
    is_float,
    loosest_default_tolerance,
    resolve,
)
from runner.definition.sweep import parse_sweep
from runner.definition.toolchains import command
from runner.errors import BuildError, ManifestError


def _schema_location(doc: dict, error) -> str:
    parts = list(error.absolute_path)
    if len(parts) >= 2 and parts[0] == "case" and isinstance(parts[1], int):
        cases = doc.get("case") or []
        cid = (
            cases[parts[1]].get("id")
            if parts[1] < len(cases) and isinstance(cases[parts[1]], dict)
            else None
        )
        head = f"case {cid!r}" if cid else f"case[{parts[1]}]"
        rest = parts[2:]
    else:
        head, rest = "", parts
    tail = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".")
    return ": ".join(x for x in (head, tail) if x) or "(top level)"


def _schema_check(doc: dict, path: Path) -> None:
    from jsonschema.exceptions import best_match

    from protocol.validation import message

    error = best_match(validator("cases").iter_errors(doc))
    if error is None:
        return
    text = message(error)
    parts = list(error.absolute_path)
    if error.validator == "additionalProperties":
        text = f"unknown field: {text}"
    elif (
        error.validator == "oneOf"
        and len(parts) >= 2
        and parts[-2] == "params"
        and isinstance(error.instance, dict)
    ):
        text = (
            'a parameter takes either buffer = "<buffer name>" or both type and value '
            f"(got keys: {', '.join(sorted(error.instance))})"
        )
    raise ManifestError(f"{path}: {_schema_location(doc, error)}: {text}")


def load(path: str | Path) -> Suite:
    """Parse and validate a suite manifest."""
    path = Path(path)
    try:
        raw, doc = read_toml(path, "manifest")
    except InputFileError as exc:
        raise ManifestError(str(exc)) from None
    _schema_check(doc, path)
    root = path.resolve().parent
    defaults = {**DEFAULT_SETTINGS, **doc.get("defaults", {})}
    cases, seen = [], set()
    for raw_case in doc["case"]:
        case = _case(raw_case, defaults, root, path)
        if case.id in seen:
            raise ManifestError(f"{path}: case {case.id!r}: id: duplicate case id")
        seen.add(case.id)
        cases.append(case)
    suite = doc["suite"]
    return Suite(
        path=path,
        root=root,
        name=suite["name"],
        version=suite["version"],
        gpu=suite.get("gpu"),
        cases=tuple(cases),
        sha256=hashlib.sha256(raw).hexdigest(),
        primary=_primary(suite.get("primary"), cases, path),
    )


def _primary(name: str | None, cases: list[CaseSpec], path: Path) -> str | None:
    """`suite.primary` must name a candidate that at least one case has."""
    if name is None:
        return None
    candidates = {i.name for c in cases for i in c.impls if i.role == "candidate"}
    if name not in candidates:
        raise ManifestError(
            f"{path}: suite.primary: {name!r} is not the name of any case's candidate "
            f"(candidates: {', '.join(sorted(candidates)) or 'none'})"
        )
    return name


def _valid(raw: dict, dist: Distribution | None, where: str) -> tuple | None:
    """The buffer's `valid` range as (min, max), its missing bound the dtype's own; checked to
    fit the dtype and to hold the declared init's range."""
    if "valid" not in raw:
        return None
    if dist is None:
        raise ManifestError(
            f"{where}: only a generated buffer (one with init) takes a valid range; "
            f"{raw['name']!r} is an {raw['role']} without init"
        )
    dtype, valid = raw["dtype"], raw["valid"]
    low, high = full_range(dtype)
    low, high = valid.get("min", low), valid.get("max", high)
    if not is_float(dtype):
        for key in ("min", "max"):
            if key in valid and not isinstance(valid[key], int):
                raise ManifestError(
                    f"{where}.{key}: a {dtype} buffer's bound must be an integer, got {valid[key]!r}"
                )
    try:
        Distribution("edges", low, high).validate(dtype, where)
    except ValueError as exc:
        raise ManifestError(str(exc)) from None
    if dist.low < low or dist.high > high:
        raise ManifestError(
            f"{where}: the init range [{dist.low!r}, {dist.high!r}] reaches outside the valid "
            f"range [{low!r}, {high!r}]; the reference must hold for the declared inputs"
        )
    return (low, high)


def _case(raw: dict, defaults: dict, root: Path, path: Path) -> CaseSpec:
    cid = raw["id"]
    w = f"{path}: case {cid!r}"
    settings = Settings(**{**defaults, **raw.get("settings", {})})
    buffers = _buffers(raw["buffers"], settings, w)
    params = _params(raw["params"], {b.name for b in buffers}, w)
    impls = _impls(raw["impl"], root, w)
    tol = raw["tolerance"]
    all_int = all(not is_float(b.dtype) for b in buffers if b.written)
    exact = bool(tol.get("exact", all_int))
    if not exact and "rtol" not in tol and "atol" not in tol:
        raise ManifestError(
            f"{w}: tolerance: give rtol and/or atol for float outputs, or exact = true"
        )
    # a part left out takes its dtype's default (spec.DEFAULT_TOLERANCES); none under exact
    default_rtol, default_atol = (
        (0.0, 0.0) if exact else loosest_default_tolerance(b.dtype for b in buffers if b.written)
    )
    ref = raw["reference"]
    ref_file = inside_suite(root, ref.split(":", 1)[0], f"{w}: reference")
    if not ref_file.is_file():
        raise ManifestError(
            f"{w}: reference: file {ref.split(':', 1)[0]} not found (looked at {ref_file})"
        )
    if not any(b.written for b in buffers):
        raise ManifestError(f"{w}: buffers: at least one buffer must have role output or inout")
    case = CaseSpec(
        id=cid,
        version=raw["version"],
        description=raw["description"],
        dims=dict(raw["dims"]),
        check_dims=dict(raw.get("check_dims", raw["dims"])),
        buffers=tuple(buffers),
        params=tuple(params),
        grid=raw["grid"],
        block=raw.get("block", settings.block),
        shared_bytes=raw.get("shared_bytes", 0),
        reference=ref,
        rtol=float(tol.get("rtol", default_rtol)),
        atol=float(tol.get("atol", default_atol)),
        exact=exact,
        bytes=raw.get("bytes"),
        flops=raw.get("flops"),
        flop_dtype=raw.get("flop_dtype"),
        settings=settings,
        impls=tuple(impls),
        where=w,
    )
    if set(case.check_dims) != set(case.dims):
        raise ManifestError(
            f"{w}: check_dims: must name the same dimensions as dims ({', '.join(sorted(case.dims))})"
        )
    resolve(case, case.dims)  # every expression must evaluate at both sizes
    resolve(case, case.check_dims)
    return dataclasses.replace(case, sweep=parse_sweep(raw, case))


def _buffers(raw: list[dict], settings: Settings, w: str) -> list[BufferSpec]:
    """The case's buffers: names unique, an input's distribution valid for its dtype (and
    required), each one's seed and valid range."""
    buffers, names = [], set()
    for i, b in enumerate(raw):
        if b["name"] in names:
            raise ManifestError(f"{w}: buffers[{i}].name: duplicate buffer name {b['name']!r}")
        names.add(b["name"])
        dist = None
        if "init" in b:
            init = b["init"]
            dist = Distribution(init["dist"], init["low"], init["high"])
            try:
                dist.validate(b["dtype"], where=f"{w}: buffers.{b['name']}.init")
            except ValueError as exc:
                raise ManifestError(str(exc)) from None
        elif b["role"] in ("input", "inout"):
            raise ManifestError(
                f"{w}: buffers.{b['name']}.init: an {b['role']} buffer needs an init table "
                '(e.g. init = { dist = "uniform", low = -1.0, high = 1.0 })'
            )
        seed = b.get("init", {}).get("seed", settings.seed)
        valid = _valid(b, dist, f"{w}: buffers.{b['name']}.valid")
        buffers.append(BufferSpec(b["name"], b["dtype"], b["length"], b["role"], dist, seed, valid))
    return buffers


def _params(raw: list[dict], names: set[str], w: str) -> list[ParamSpec]:
    """The kernel's parameters in order: names unique, a pointer naming one of `names`."""
    params, pnames = [], set()
    for i, p in enumerate(raw):
        if p["name"] in pnames:
            raise ManifestError(f"{w}: params[{i}].name: duplicate parameter name {p['name']!r}")
        pnames.add(p["name"])
        if "buffer" in p:
            if p["buffer"] not in names:
                raise ManifestError(
                    f"{w}: params[{i}].buffer: no buffer named {p['buffer']!r} (buffers: {', '.join(sorted(names))})"
                )
            params.append(ParamSpec(p["name"], "ptr", buffer=p["buffer"]))
        else:
            params.append(ParamSpec(p["name"], p["type"], value=p["value"]))
    return params


def _variables(m: dict, w: str) -> dict[str, str]:
    """A command template's declared variables (`vars`): only for toolchain = "command", none
    named as a placeholder."""
    variables = m.get("vars", {})
    if variables and m["toolchain"] != "command":
        raise ManifestError(f'{w}: vars: only a toolchain = "command" template has variables')
    for name in variables:
        if name in command.PLACEHOLDERS:
            raise ManifestError(
                f"{w}: vars.{name}: {{{name}}} is filled in by kernelgap; name the variable otherwise"
            )
    return dict(variables)


def _impls(raw: list[dict], root: Path, w: str) -> list[ImplSpec]:
    """The implementations: names unique, sources inside the suite, a command template exactly
    for the command toolchain, and exactly one baseline."""
    impls, inames = [], set()
    for i, m in enumerate(raw):
        if m["name"] in inames:
            raise ManifestError(f"{w}: impl[{i}].name: duplicate implementation name {m['name']!r}")
        inames.add(m["name"])
        source = inside_suite(root, m["source"], f"{w}: impl {m['name']!r}: source")
        if not source.is_file():
            raise ManifestError(
                f"{w}: impl {m['name']!r}: source: file {m['source']} not found (looked at {source})"
            )
        if (m["toolchain"] == "command") != ("command" in m):
            raise ManifestError(
                f"{w}: impl {m['name']!r}: command: give a command template (e.g. "
                '"mycc --arch {arch} {source} -o {output}") exactly when toolchain = "command"'
            )
        variables = _variables(m, f"{w}: impl {m['name']!r}")
        if "command" in m:
            try:
                command.check(m["command"], variables)
            except BuildError as exc:
                raise ManifestError(f"{w}: impl {m['name']!r}: command: {exc}") from None
        impls.append(
            ImplSpec(
                m["name"],
                m["role"],
                m["toolchain"],
                source,
                m["source"],
                m["entry"],
                tuple(m.get("flags", ())),
                m.get("command"),
                tuple(variables.items()),
            )
        )
    baselines = [m.name for m in impls if m.role == "baseline"]
    if len(baselines) != 1:
        raise ManifestError(
            f'{w}: impl: exactly one implementation must have role = "baseline" (found {len(baselines)}: {baselines})'
        )
    return impls
