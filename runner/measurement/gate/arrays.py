"""The few array operations the Python API needs, for numpy arrays and torch tensors alike.

Callables under test take and return framework arrays; the API never converts them on the hot
path. These functions are used outside timing only: snapshots of the shared inputs, the
comparison with the reference, and the controls. torch is imported only when a tensor is seen.
"""

from __future__ import annotations

import numpy as np

from runner.measurement import precision
from runner.measurement.gate import elements

__all__ = [
    "address_range",
    "as_outputs",
    "cast_like",
    "compare",
    "constant_like",
    "dtype_name",
    "dtype_names",
    "is_array",
    "is_tensor",
    "lower_precisions",
    "lowered",
    "round_like",
    "rounded",
    "same_bytes",
    "shares_memory",
    "snapshot",
    "subset_scaled",
    "zeros_like",
]


def is_tensor(x) -> bool:
    """A torch tensor (checked without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def is_array(x) -> bool:
    return is_tensor(x) or isinstance(x, np.ndarray)


def dtype_name(x) -> str:
    """'float16', 'bfloat16', 'float32', 'int64', ... for a tensor or an array."""
    if is_tensor(x):
        return str(x.dtype).removeprefix("torch.")
    return np.asarray(x).dtype.name


def dtype_names(arrays) -> tuple[str, ...]:
    """dtype_name of each array (for the tolerance text of a declaration)."""
    return tuple(dtype_name(x) for x in arrays)


def as_outputs(value, what: str) -> tuple:
    """A callable's return value as a tuple of arrays: one array, or a tuple or list of them."""
    items = tuple(value) if isinstance(value, tuple | list) else (value,)
    if value is None or not items:
        raise TypeError(
            f"{what} returned nothing to check; return the output array (or a tuple of them)"
        )
    for i, item in enumerate(items):
        if not is_array(item):
            raise TypeError(
                f"{what} returned {type(item).__name__} as output {i}; expected a torch tensor "
                "or a numpy array"
            )
    return items


def snapshot(x):
    """An independent copy of `x` (same device), to tell later whether `x` was written."""
    if is_tensor(x):
        return x.detach().clone()
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


def _raw_bytes(x):
    if is_tensor(x):
        flat = x.detach().contiguous().reshape(-1)
        return flat.view(dtype=__import__("torch").uint8) if flat.numel() else flat
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


def same_bytes(a, b) -> bool:
    """Bit-for-bit equality (so NaN payloads and -0.0 count), shape included."""
    if is_array(a) != is_array(b):
        return False
    if not is_array(a):
        return a is b or a == b
    if tuple(a.shape) != tuple(b.shape) or dtype_name(a) != dtype_name(b):
        return False
    ra, rb = _raw_bytes(a), _raw_bytes(b)
    if is_tensor(a):
        return bool((ra == rb).all().item()) if ra.numel() else True
    return bool(np.array_equal(ra, rb))


def address_range(x) -> tuple[int, int] | None:
    """(first byte's address, bytes) of an array's memory; None for an empty one or a non-array."""
    if is_tensor(x):
        return (x.data_ptr(), x.untyped_storage().nbytes()) if x.numel() else None
    if isinstance(x, np.ndarray):
        lo, hi = getattr(np.lib, "array_utils", np).byte_bounds(x)  # numpy 2, numpy 1
        return (lo, hi - lo) if hi > lo else None
    return None


def shares_memory(x, others) -> bool:
    """Whether array `x` overlaps the memory of any of `others` (False for an empty x)."""
    mine = address_range(x)
    if mine is None:
        return False
    for other in others:
        theirs = address_range(other)
        if theirs and mine[0] < theirs[0] + theirs[1] and theirs[0] < mine[0] + mine[1]:
            return True
    return False


def zeros_like(x):
    if is_tensor(x):
        return __import__("torch").zeros_like(x)
    return np.zeros_like(x)


def constant_like(x):
    """An array like `x` holding one value everywhere: the mean of its finite elements (rounded
    for integers and bools)."""
    values = to_numpy(x).reshape(-1)
    if values.dtype.kind in "fc":
        finite = values[np.isfinite(values)]
        wide = np.complex128 if values.dtype.kind == "c" else np.float64
        value = finite.astype(wide).mean().item() if finite.size else 0.0
    else:
        value = round(float(values.astype(np.float64).mean())) if values.size else 0
        value = bool(value) if values.dtype.kind == "b" else value
    if is_tensor(x):
        return __import__("torch").full_like(x, value)
    return np.full_like(x, value)


def subset_scaled(x):
    """`x` with every second element (flat order) zeroed and the others doubled: the input a
    kernel that did half the work and scaled it up sees; None for anything but a float array
    of two or more elements."""
    if not is_array(x) or dtype_name(x) not in _FLOAT_NAMES or int(np.prod(x.shape)) < 2:
        return None
    y = (x * 2).contiguous() if is_tensor(x) else np.ascontiguousarray(x * 2)
    y.reshape(-1)[1::2] = 0  # a view of y: contiguous, so reshape never copies
    return y


_FLOAT_NAMES = ("float64", "float32", "float16", "bfloat16")

# numpy and torch dtypes of runner.measurement.precision's names; numpy has no bfloat16
_TORCH_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_NUMPY_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16"}


def lower_precisions(x) -> tuple[str, ...]:
    """The precisions below `x`'s (runner.measurement.precision names; complex128's parts to
    f32); empty for integers, bools and complex64."""
    name = dtype_name(x)
    if name == "complex128":
        return ("f32",)
    return precision.lower_precisions(name)


def _above(x, to: str) -> bool:
    own = precision.short_name(dtype_name(x)) if is_array(x) else None
    if own is None:
        return is_array(x) and dtype_name(x) == "complex128" and to == "f32"
    return precision.PRECISIONS[own].significand_bits > precision.PRECISIONS[to].significand_bits


def rounded(x, to: str):
    """`x` with its values rounded to precision `to`, in x's own dtype; None when x is not a
    float array above `to` (nothing to round)."""
    if not _above(x, to):
        return None
    if is_tensor(x):
        torch = __import__("torch")
        return x.to(getattr(torch, _TORCH_DTYPES[to])).to(x.dtype)
    if dtype_name(x) == "complex128":
        return np.asarray(x).astype(np.complex64).astype(np.complex128)
    return precision.round_to(np.asarray(x), to)


def lowered(x, to: str):
    """`x` converted to the dtype of precision `to` (arithmetic on it then runs in `to`), or
    None where the framework has no such dtype (numpy: bfloat16) or x is not above `to`."""
    if not _above(x, to):
        return None
    if is_tensor(x):
        torch = __import__("torch")
        return x.to(getattr(torch, _TORCH_DTYPES[to]))
    if dtype_name(x) == "complex128":
        return np.asarray(x).astype(np.complex64)
    numpy_name = _NUMPY_DTYPES.get(to)
    return None if numpy_name is None else np.asarray(x).astype(numpy_name)


def round_like(x, to: str, like):
    """`x` rounded to precision `to`, in the dtype of `like`."""
    r = rounded(cast_like(x, like), to)
    return cast_like(x, like) if r is None else r


def cast_like(x, like):
    """`x` in the dtype of `like`."""
    if is_tensor(x):
        return x.to(like.dtype)
    return np.asarray(x).astype(np.asarray(like).dtype)


def to_numpy(x) -> np.ndarray:
    """A host copy in the array's own dtype (bfloat16, which numpy lacks, widens exactly to float32)."""
    if is_tensor(x):
        import torch

        t = x.detach()
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)
        return t.cpu().numpy()
    return np.asarray(x)


AGREE_CHUNK = 1 << 21  # elements a pass/fail comparison looks at before it may stop


def agrees(actual, expected, rtol: float, atol: float, chunk: int = AGREE_CHUNK) -> bool:
    """Whether `compare` would find no mismatch, decided chunk by chunk and stopping at the first
    chunk that has one: outputs that did not do the work (a null model, a negative control) fail
    in their first chunk, so refusing them costs one chunk rather than a pass over every element."""
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        return False
    a, e = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(e).reshape(-1)
    return all(
        compare(a[start : start + chunk], e[start : start + chunk], rtol, atol)["mismatches"] == 0
        for start in range(0, max(a.size, 1), chunk)
    )


def compare(actual, expected, rtol: float, atol: float) -> dict:
    """The gate's element test (gate.elements: integers and bools exact, at any width; NaN only
    where NaN is expected) of two arrays of any shape.

    Returns elements, mismatches, max_abs_err, max_rel_err and, on a mismatch, `problem`
    naming the first offending index with both values; a shape mismatch counts every element.
    """
    a, e = np.ascontiguousarray(to_numpy(actual)), np.ascontiguousarray(to_numpy(expected))
    if a.shape != e.shape:
        return {
            "elements": int(e.size),
            "mismatches": int(e.size),
            "max_abs_err": None,
            "max_rel_err": None,
            "problem": f"shape {tuple(a.shape)} where {tuple(e.shape)} was expected",
        }
    complex_parts = "c" in (a.dtype.kind, e.dtype.kind)
    if complex_parts:  # real and imaginary parts, each within tolerance
        a = np.stack([a.real, a.imag]).astype(np.float64)
        e = np.stack([e.real, e.imag]).astype(np.float64)
    elif (a.dtype.kind in "iub") != (e.dtype.kind in "iub"):  # an integer for a float: as floats
        a, e = a.astype(np.float64), e.astype(np.float64)
    exact = e.dtype.kind in "iub"
    result = elements.compare(a.reshape(-1), e.reshape(-1), elements.Tolerance(rtol, atol, exact))
    out = {k: result[k] for k in ("elements", "mismatches", "max_abs_err", "max_rel_err")}
    first = result.get("first_mismatch")
    if first:
        index = [int(v) for v in np.unravel_index(first["index"], e.shape)] if e.ndim else []
        if complex_parts:
            index = [("real", "imag")[index[0]], *index[1:]]
        rule = "not equal (exact)" if exact else f"outside rtol={rtol:g}, atol={atol:g}"
        out["problem"] = (
            f"{out['mismatches']} of {out['elements']} elements {rule}; first at "
            f"{index}: got {first['got']!r}, expected {first['expected']!r}"
        )
    return out
