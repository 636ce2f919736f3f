"""kernelgap's own kernels: CUDA source (`kernels.cu`) and the PTX generated from it.

The PTX is committed so the GPU box needs no compiler for these kernels; its first line records
the SHA-256 of the source it was built from, its second the nvcc command. Rebuild it with
`python -m runner.gpu.device` after editing kernels.cu (tests fail while the two disagree).

Entries: kg_fill_random (device twin of runner/gpu/generator.py), kg_flush_l2, kg_spin, kg_compare,
kg_poison_shared, kg_poison_heap and kg_free_heap (the gate's poisons of scratch), and
kg_stream_read, kg_stream_write, kg_stream_copy (the device's bandwidth, runner.measurement.environment).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "KERNELS_CU",
    "KERNELS_PTX",
    "NVCC_FLAGS",
    "load_ptx",
    "recorded_sha256",
    "regenerate",
    "source_sha256",
]

DEVICE_DIR = Path(__file__).resolve().parent
KERNELS_CU = DEVICE_DIR / "kernels.cu"
KERNELS_PTX = DEVICE_DIR / "kernels.ptx"
# compute_75 is the oldest target CUDA 13 accepts; newer GPUs JIT the PTX. -fmad=false keeps
# the generator's float arithmetic unfused, like its numpy twin.
NVCC_FLAGS = ("-ptx", "-arch=compute_75", "-O3", "-fmad=false")
SHA_PREFIX = "// kernelgap-source-sha256: "
_SHA_LINE = re.compile(r"^// kernelgap-source-sha256: ([0-9a-f]{64})$")


def source_sha256() -> str:
    """SHA-256 (hex) of the bytes of kernels.cu, the only source the PTX is built from."""
    return hashlib.sha256(KERNELS_CU.read_bytes()).hexdigest()


def recorded_sha256() -> str:
    """The source hash written in the first line of kernels.ptx."""
    if not KERNELS_PTX.is_file():
        raise FileNotFoundError(
            f"{KERNELS_PTX} is missing; generate it with `python -m runner.gpu.device`"
        )
    first = KERNELS_PTX.read_text().split("\n", 1)[0]
    match = _SHA_LINE.match(first)
    if match is None:
        raise ValueError(
            f"{KERNELS_PTX}: line 1 should be '{SHA_PREFIX}<64 hex digits>', got {first!r}; "
            "regenerate it with `python -m runner.gpu.device`"
        )
    return match.group(1)


def load_ptx() -> str:
    """The committed PTX text, refused if it was built from another version of kernels.cu."""
    text = KERNELS_PTX.read_text()
    recorded, current = recorded_sha256(), source_sha256()
    if recorded != current:
        raise RuntimeError(
            f"{KERNELS_PTX} was built from a kernels.cu with sha256 {recorded}, but the source "
            f"now hashes to {current}; regenerate it with `python -m runner.gpu.device`"
        )
    return text


def regenerate(nvcc: str = "nvcc") -> None:
    """Rebuild kernels.ptx from kernels.cu with nvcc and write it with its two header lines."""
    with tempfile.TemporaryDirectory() as tmp:
        # Build into a scratch file so a failed build leaves the committed PTX untouched.
        out = Path(tmp) / KERNELS_PTX.name
        command = [nvcc, *NVCC_FLAGS, "-o", str(out), KERNELS_CU.name]
        try:
            done = subprocess.run(command, cwd=DEVICE_DIR, capture_output=True, text=True)
        except FileNotFoundError:
            raise RuntimeError(
                f"nvcc not found as {nvcc!r}: install the CUDA toolkit or pass the path of its "
                "nvcc; kernels.ptx was left as it was"
            ) from None
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} (in {DEVICE_DIR}) failed with exit status "
                f"{done.returncode}:\n{done.stderr.strip()}"
            )
        body = out.read_text()
    recorded_command = " ".join(["nvcc", *NVCC_FLAGS, "-o", KERNELS_PTX.name, KERNELS_CU.name])
    KERNELS_PTX.write_text(f"{SHA_PREFIX}{source_sha256()}\n// {recorded_command}\n{body}")
