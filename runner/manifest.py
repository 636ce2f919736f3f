"""The suite manifest (`benchmarks/cases.toml`): parsing, validation and geometry resolution.

The TOML is validated against `schemas/cases.schema.json` first (unknown keys, missing
fields, bad types), then checked for what a schema cannot say: buffer references, files
that must exist, one baseline per case, expressions that must evaluate. Every message
names the file, the case id and the field, and says what was expected.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from protocol.validation import validator
from runner import expr
from runner.generator import DTYPES, Distribution, is_float

PARAM_KINDS = ("i32", "u32", "i64", "u64", "f32", "f64")
DEFAULT_SETTINGS = {
    "block": 256,
    "warmup": 10,
    "samples": 30,
    "target_sample_ms": 50.0,
    "mode": "hot",
    "timeout_s": 60.0,
    "seed": 0,
}


class ManifestError(ValueError):
    """The manifest is malformed; the message names the file, case, field and expectation."""


@dataclass(frozen=True)
class Settings:
    block: object
    warmup: int
    samples: int
    target_sample_ms: float
    mode: str
    timeout_s: float
    seed: int


@dataclass(frozen=True)
class BufferSpec:
    name: str
    dtype: str
    length: object
    role: str  # input | output | inout
    dist: Distribution | None
    seed: int

    @property
    def written(self) -> bool:
        return self.role in ("output", "inout")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str  # "ptr" for a buffer, else a scalar type
    buffer: str | None = None
    value: object = None


@dataclass(frozen=True)
class ImplSpec:
    name: str
    role: str
    toolchain: str
    source: Path
    source_rel: str
    entry: str
    flags: tuple[str, ...] = ()
    command: str | None = None  # toolchain = "command": the compiler's command template


@dataclass(frozen=True)
class Geometry:
    """A case's launch and buffers at one set of dimensions (canonical or correctness)."""

    dims: dict
    lengths: dict
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    scalars: dict
    bytes: float | None
    flops: float | None


@dataclass(frozen=True)
class CaseSpec:
    id: str
    version: int
    description: str
    dims: dict
    check_dims: dict
    buffers: tuple[BufferSpec, ...]
    params: tuple[ParamSpec, ...]
    grid: object
    block: object
    shared_bytes: object
    reference: str
    rtol: float
    atol: float
    exact: bool
    bytes: object
    flops: object
    flop_dtype: str | None
    settings: Settings
    impls: tuple[ImplSpec, ...]
    where: str = field(repr=False, default="")

    @property
    def baseline(self) -> ImplSpec:
        return next(i for i in self.impls if i.role == "baseline")

    def impl(self, name: str) -> ImplSpec:
        return next(i for i in self.impls if i.name == name)

    def buffer(self, name: str) -> BufferSpec:
        return next(b for b in self.buffers if b.name == name)

    def signature(self) -> list[tuple[str, str]]:
        """The kernel parameters in order as (name, kind), kind "ptr" for buffers."""
        return [(p.name, p.kind) for p in self.params]

    def geometry(self, dims: dict) -> Geometry:
        return resolve(self, dims)


@dataclass(frozen=True)
class Suite:
    path: Path
    root: Path
    name: str
    version: int
    gpu: str | None
    cases: tuple[CaseSpec, ...]
    sha256: str
    primary: str | None = None  # the headline candidate's implementation name

    def case(self, case_id: str) -> CaseSpec:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise ManifestError(
            f"{self.path}: no case with id {case_id!r} (cases: {', '.join(c.id for c in self.cases)})"
        )


def _dim3(value, where: str, names: dict, minimum: int = 1) -> tuple[int, int, int]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    dims = [
        expr.evaluate_int(v, names, where=f"{where}[{i}]", minimum=minimum)
        for i, v in enumerate(items)
    ]
    return tuple(dims + [1] * (3 - len(dims)))


def resolve(case: CaseSpec, dims: dict) -> Geometry:
    """Evaluate every expression of `case` over `dims` (raises ManifestError naming the field)."""
    w = case.where
    try:
        lengths = {
            b.name: expr.evaluate_int(
                b.length, dims, where=f"{w}: buffers.{b.name}.length", minimum=0
            )
            for b in case.buffers
        }
        scalars = {}
        for p in case.params:
            if p.kind == "ptr":
                continue
            value = expr.evaluate(p.value, dims, where=f"{w}: params.{p.name}.value")
            if p.kind.startswith("f"):
                scalars[p.name] = float(value)
            else:
                scalars[p.name] = expr.evaluate_int(
                    value, dims, where=f"{w}: params.{p.name}.value"
                )
        grid = _dim3(case.grid, f"{w}: grid", dims)
        block = _dim3(case.block, f"{w}: block", dims)
        shared = expr.evaluate_int(case.shared_bytes, dims, where=f"{w}: shared_bytes", minimum=0)
        nbytes = (
            None
            if case.bytes is None
            else float(expr.evaluate(case.bytes, dims, where=f"{w}: bytes"))
        )
        flops = (
            None
            if case.flops is None
            else float(expr.evaluate(case.flops, dims, where=f"{w}: flops"))
        )
    except expr.ExprError as exc:
        raise ManifestError(str(exc)) from None
    _check_scalar_ranges(case, scalars)
    _check_buffer_sizes(case, lengths)
    return Geometry(dict(dims), lengths, grid, block, shared, scalars, nbytes, flops)


# No GPU has this much memory for one buffer: a length past it is a mistake in the manifest
# (the GPU box refuses sizes past the device's own memory before allocating anything).
MAX_BUFFER_BYTES = 1 << 40


def buffer_bytes(case: CaseSpec, lengths: dict[str, int]) -> dict[str, int]:
    """Each buffer's size in bytes for the given lengths (Geometry.lengths)."""
    return {b.name: lengths[b.name] * np.dtype(DTYPES[b.dtype]).itemsize for b in case.buffers}


def _check_buffer_sizes(case: CaseSpec, lengths: dict[str, int]) -> None:
    sizes = buffer_bytes(case, lengths)
    for b in case.buffers:
        nbytes = sizes[b.name]
        if nbytes > MAX_BUFFER_BYTES:
            raise ManifestError(
                f"{case.where}: buffers.{b.name}.length: {b.length!r} = {lengths[b.name]} "
                f"{b.dtype} values ({nbytes:.3g} bytes) is past the limit of "
                f"{MAX_BUFFER_BYTES:.3g} bytes for one buffer"
            )


def _check_scalar_ranges(case: CaseSpec, scalars: dict) -> None:
    for p in case.params:
        if p.kind in ("i32", "u32", "i64", "u64"):
            info = np.iinfo(DTYPES[p.kind])
            lo, hi = int(info.min), int(info.max)
            if not lo <= scalars[p.name] <= hi:
                raise ManifestError(
                    f"{case.where}: params.{p.name}.value: {scalars[p.name]} does not fit {p.kind} ([{lo}, {hi}])"
                )


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
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read the manifest: {exc.strerror}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: malformed TOML: {exc}") from None
    except RecursionError:
        raise ManifestError(
            f"{path}: malformed TOML: arrays or tables nested too deeply to parse"
        ) from None
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


def _case(raw: dict, defaults: dict, root: Path, path: Path) -> CaseSpec:
    cid = raw["id"]
    w = f"{path}: case {cid!r}"
    settings = Settings(**{**defaults, **raw.get("settings", {})})
    buffers, names = [], set()
    for i, b in enumerate(raw["buffers"]):
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
        buffers.append(BufferSpec(b["name"], b["dtype"], b["length"], b["role"], dist, seed))
    params, pnames = [], set()
    for i, p in enumerate(raw["params"]):
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
    impls, inames = [], set()
    for i, m in enumerate(raw["impl"]):
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
            )
        )
    baselines = [m.name for m in impls if m.role == "baseline"]
    if len(baselines) != 1:
        raise ManifestError(
            f'{w}: impl: exactly one implementation must have role = "baseline" (found {len(baselines)}: {baselines})'
        )
    tol = raw["tolerance"]
    all_int = all(not is_float(b.dtype) for b in buffers if b.written)
    exact = bool(tol.get("exact", all_int))
    if not exact and "rtol" not in tol and "atol" not in tol:
        raise ManifestError(
            f"{w}: tolerance: give rtol and/or atol for float outputs, or exact = true"
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
        rtol=float(tol.get("rtol", 0.0)),
        atol=float(tol.get("atol", 0.0)),
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
    return case


def inside_suite(root: Path, relative: str, where: str) -> Path:
    """`relative` resolved under the suite's folder `root`; ManifestError when it is absolute or
    leads outside it (`..`, or a symbolic link out): a suite reads and runs only its own files."""
    if Path(relative).is_absolute():
        raise ManifestError(
            f"{where}: {relative!r} is an absolute path; give a path relative to the suite's "
            f"folder ({root})"
        )
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ManifestError(
            f"{where}: {relative!r} leads outside the suite's folder ({root}, resolved to {path}); "
            "keep a suite's files under its folder"
        )
    return path


def load_reference(suite: Suite, case: CaseSpec):
    """The case's numpy reference function, called with the keyword arguments it names."""
    file_part, func = case.reference.split(":", 1)
    file = inside_suite(suite.root, file_part, f"{case.where}: reference")
    spec = importlib.util.spec_from_file_location(f"kernelgap_reference_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ManifestError(
            f"{case.where}: reference: importing {file_part} failed: {exc!r}"
        ) from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ManifestError(f"{case.where}: reference: {file_part} has no function {func!r}")
    return fn


def call_reference(fn, case: CaseSpec, geometry: Geometry, inputs: dict) -> dict:
    """Call `fn` with the dims, scalar params and input arrays it names; returns {buffer: array}."""
    available = {**geometry.dims, **geometry.scalars, **inputs}
    sig = inspect.signature(fn)
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    kwargs = available if takes_all else {k: v for k, v in available.items() if k in sig.parameters}
    missing = [
        k
        for k, p in sig.parameters.items()
        if k not in kwargs
        and p.default is inspect.Parameter.empty
        and p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    if missing:
        raise ManifestError(
            f"{case.where}: reference {case.reference}: parameters {missing} are neither dims, params nor buffers"
        )
    result = fn(**kwargs)
    if not isinstance(result, dict):
        raise ManifestError(
            f"{case.where}: reference {case.reference}: must return a dict of output arrays"
        )
    return result
