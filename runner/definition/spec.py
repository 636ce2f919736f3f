"""The suite's data model with no file and no GPU behind it: cases, buffers, params, settings,
and the geometry a case resolves to at given dims (lengths, grid, scalars, bytes, FLOPs), with
the limits a resolved case must keep. runner.definition.manifest builds these from the TOML.

`check_launch()`: what a kernel launch may ask of a GPU, grid and block extents, threads per block and dynamic
shared memory per block.

Numbers from the CUDA C++ Programming Guide, "Technical Specifications per Compute
Capability": the same for every architecture since 3.0 except the shared memory a block may
opt in to. `check_launch(..., arch=None)` holds a launch to what any GPU allows (the manifest
loader: `runner check --manifest-only`, `harness run` before a target is reached);
with an arch (`runner check --arch`) to what that architecture allows. A launch past these
limits fails on every GPU with CUDA_ERROR_INVALID_VALUE; refused at check time it names the case
and the field instead."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from runner.definition import expr
from runner.definition.inputs import DTYPES, Distribution, full_range
from runner.errors import LaunchLimitError, ManifestError

MAX_GRID = (2**31 - 1, 65535, 65535)


MAX_BLOCK = (1024, 1024, 64)


MAX_THREADS_PER_BLOCK = 1024


# compute capability -> the most dynamic shared memory one block may opt in to (bytes)
SHARED_BYTES_PER_BLOCK = {
    "7.0": 96 * 1024,
    "7.2": 48 * 1024,
    "7.5": 64 * 1024,
    "8.0": 163 * 1024,
    "8.6": 99 * 1024,
    "8.7": 163 * 1024,
    "8.9": 99 * 1024,
    "9.0": 227 * 1024,
    "10.0": 227 * 1024,
    "10.3": 227 * 1024,
    "12.0": 99 * 1024,
}


ANY_GPU_SHARED_BYTES = max(SHARED_BYTES_PER_BLOCK.values())


def _capability(arch: str) -> str | None:
    found = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)[a-z]?", arch)
    return f"{int(found.group(1))}.{found.group(2)}" if found else None


def shared_limit(arch: str | None) -> tuple[int, str]:
    """(bytes of dynamic shared memory one block may use, what that limit is) for `arch`; the
    largest of any GPU when `arch` is None or not in the table."""
    cc = _capability(arch) if arch else None
    if cc in SHARED_BYTES_PER_BLOCK:
        return SHARED_BYTES_PER_BLOCK[cc], f"the most a block may use on {arch}"
    return ANY_GPU_SHARED_BYTES, "the most a block may use on any GPU"


def check_launch(
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_bytes: int,
    *,
    where: str,
    arch: str | None = None,
) -> None:
    """LaunchLimitError naming `where` and the field when the launch exceeds the limits."""
    for name, dims, limits in (("grid", grid, MAX_GRID), ("block", block, MAX_BLOCK)):
        for axis, value, limit in zip("xyz", dims, limits, strict=True):
            if value > limit:
                raise LaunchLimitError(
                    f"{where}: {name}.{axis} = {value} is past the limit of {limit} "
                    f"(CUDA: {name} dimensions at most {list(limits)})"
                )
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchLimitError(
            f"{where}: block {list(block)} has {threads} threads, past the limit of "
            f"{MAX_THREADS_PER_BLOCK} per block"
        )
    limit, what = shared_limit(arch)
    if shared_bytes > limit:
        raise LaunchLimitError(
            f"{where}: shared_bytes = {shared_bytes} is past {limit} bytes, {what}"
        )


PARAM_KINDS = ("i32", "u32", "i64", "u64", "f32", "f64")


# The tolerance a float output is checked with where none is declared (docs/python-api.md,
# "Default tolerances"): rtol by dtype, tight enough to refuse the next lower precision; atol
# ATOL_EPS of the dtype's resolution (machine epsilon, its spacing at 1), no more than rtol:
# the cancellation error of honest arithmetic on unit-scale values (a dot product's partial sums
# rounded, an FMA contracted) with room for sums of ~1000 terms. It was atol = rtol, which for
# f64 (1e-12, 4500 ulps at 1) accepted any error up to 1e-12 at every value below 1.
ATOL_EPS = 32
_EPS = {
    "f64": float(np.finfo(np.float64).eps),
    "f32": float(np.finfo(np.float32).eps),
    "f16": float(np.finfo(np.float16).eps),
    "bf16": 2.0**-7,  # 8 significand bits (numpy has no bfloat16)
}
_DEFAULT_RTOL = {"f64": 1e-12, "f32": 1e-5, "f16": 1e-3, "bf16": 1.6e-2}
DEFAULT_TOLERANCES = {
    name: (rtol, min(rtol, ATOL_EPS * _EPS[name])) for name, rtol in _DEFAULT_RTOL.items()
}
"""{float dtype: (rtol, atol)} where a tolerance is not declared; integers and bools are exact."""

# numpy and torch names of the float dtypes; a complex dtype's parts are of its float's
FLOAT_NAMES = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "half": "f16",
}
_COMPLEX_PARTS = {"complex128": "f64", "complex64": "f32"}


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) of DEFAULT_TOLERANCES for a suite ('f32'), numpy or torch ('float32',
    'complex64': its parts') dtype name; (0.0, 0.0), exact, for any other."""
    name = FLOAT_NAMES.get(dtype) or _COMPLEX_PARTS.get(dtype) or dtype
    return DEFAULT_TOLERANCES.get(name, (0.0, 0.0))


def loosest_default_tolerance(dtypes) -> tuple[float, float]:
    """The largest default rtol and atol among `dtypes` (a case's written buffers share one
    tolerance, so each output's default must hold)."""
    found = [default_tolerance(d) for d in dtypes]
    return max((r for r, _ in found), default=0.0), max((a for _, a in found), default=0.0)


# The input sets the correctness gate checks: the buffers' declared init at both poisons, then
# the edges of each buffer's valid range (zeros, signed zeros, both ends, every magnitude).
INPUT_SETS = ("declared", "edges")


DEFAULT_SETTINGS = {
    "block": 256,
    "warmup": 10,
    "samples": 30,
    "target_sample_ms": 50.0,
    "mode": "hot",
    "timeout_s": 60.0,
    "seed": 0,
}


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
    # [min, max] the reference holds for (manifest `valid`); None: the dtype's whole range
    valid: tuple[float, float] | tuple[int, int] | None = None

    @property
    def written(self) -> bool:
        return self.role in ("output", "inout")

    @property
    def valid_range(self) -> tuple[float, float] | tuple[int, int]:
        """The declared valid range, or the dtype's whole finite range."""
        return self.valid if self.valid is not None else full_range(self.dtype)

    def inputs(self, name: str) -> Distribution | None:
        """The distribution of input set `name` (INPUT_SETS): the declared init, or the edges of
        the valid range; None for a buffer that is not generated (an output)."""
        if self.dist is None:
            return None
        if name == "declared":
            return self.dist
        if name == "edges":
            return Distribution("edges", *self.valid_range)
        raise ValueError(f"unknown input set {name!r}; expected one of {', '.join(INPUT_SETS)}")


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
    # toolchain = "command": values of the variables its template declares ({name}), as pairs
    variables: tuple[tuple[str, str], ...] = ()
    arch: str | None = None  # built for this arch, not the run's (an option axis's value)
    option: str | None = None  # the option axis's point it is built for (sweep.OptionAxis)


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
    # the points it is measured at (runner.definition.sweep.Sweep); None: at dims alone
    sweep: object = None

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
    try:  # what no GPU can launch; runner check holds it to its --arch as well
        check_launch(grid, block, shared, where=w)
    except LaunchLimitError as exc:
        raise ManifestError(str(exc)) from None
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
