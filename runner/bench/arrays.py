"""The few array operations the Python API needs, for numpy arrays and torch tensors alike.

Callables under test take and return framework arrays; the API never converts them on the hot
path. These functions are used outside timing only: snapshots of the shared inputs, the
comparison with the reference, and the controls. torch is imported only when a tensor is seen.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_outputs",
    "compare",
    "dtype_name",
    "is_tensor",
    "nbytes",
    "same_bytes",
    "snapshot",
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


def nbytes(x) -> int:
    if is_tensor(x):
        return int(x.numel() * x.element_size())
    return int(np.asarray(x).nbytes)


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


def zeros_like(x):
    if is_tensor(x):
        return __import__("torch").zeros_like(x)
    return np.zeros_like(x)


def _to_float64_numpy(x) -> np.ndarray:
    if is_tensor(x):
        import torch

        t = x.detach()
        if t.dtype == torch.bool:
            t = t.to(torch.uint8)
        if t.is_complex():
            return t.to(torch.complex128).cpu().numpy()
        return t.to(torch.float64).cpu().numpy()
    a = np.asarray(x)
    return a if np.iscomplexobj(a) else a.astype(np.float64)


def compare(actual, expected, rtol: float, atol: float) -> dict:
    """Elementwise |actual - expected| <= atol + rtol |expected|, NaN only where NaN is expected.

    Returns elements, mismatches, max_abs_err, max_rel_err and, on a mismatch, the first
    offending index with both values; a shape mismatch counts every element.
    """
    a, e = _to_float64_numpy(actual), _to_float64_numpy(expected)
    if a.shape != e.shape:
        return {
            "elements": int(e.size),
            "mismatches": int(e.size),
            "max_abs_err": None,
            "max_rel_err": None,
            "problem": f"shape {tuple(a.shape)} where {tuple(e.shape)} was expected",
        }
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        ok = diff <= atol + rtol * np.abs(e)
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = np.isinf(a) & np.isinf(e) & (a == e)
        ok = ok | both_nan | same_inf
        finite = np.isfinite(diff)
        rel = np.where(np.abs(e) > 0, diff / np.abs(e), np.where(diff > 0, np.inf, 0.0))
    bad = np.flatnonzero(~ok.reshape(-1))
    out = {
        "elements": int(e.size),
        "mismatches": int(bad.size),
        "max_abs_err": float(diff[finite].max()) if finite.any() else None,
        "max_rel_err": float(rel[finite].max()) if finite.any() else None,
    }
    if bad.size:
        i = int(bad[0])
        index = tuple(int(v) for v in np.unravel_index(i, e.shape)) if e.ndim else ()
        out["problem"] = (
            f"{bad.size} of {e.size} elements outside rtol={rtol:g}, atol={atol:g}; first at "
            f"{list(index)}: got {a.reshape(-1)[i].item()!r}, expected {e.reshape(-1)[i].item()!r}"
        )
    return out
