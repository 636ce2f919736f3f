"""The device heap poisoned before the gate's launches (issue 50 class 7), on the GPU: a kernel
that reads `malloc`ed memory before writing it finds all ones after InternalKernels.poison_heap
(a fresh heap gave it something else), and the heap is whole again afterwards (every chunk the
poison took was freed). Run on the GPU box: `pytest -m gpu tests/runner/measurement/test_heap_poison_gpu.py`.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from runner.explain import static
from runner.gpu import driver

pytestmark = pytest.mark.gpu

ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)

# Each block mallocs `words` 8-byte words, copies what they hold into its row of `out` without
# writing them first, and frees them; a failed malloc is counted in *failed.
HEAP_READER = r"""
extern "C" __global__ void read_heap(unsigned long long* out, unsigned long long words,
                                     unsigned int* failed)
{
    __shared__ unsigned long long* scratch;
    if (threadIdx.x == 0) scratch = (unsigned long long*)malloc(words * 8);
    __syncthreads();
    if (scratch == 0) {
        if (threadIdx.x == 0) atomicAdd(failed, 1u);
        return;
    }
    for (unsigned long long i = threadIdx.x; i < words; i += blockDim.x)
        out[blockIdx.x * words + i] = ((volatile unsigned long long*)scratch)[i];
    __syncthreads();
    if (threadIdx.x == 0) free(scratch);
}
"""


@pytest.fixture(scope="module")
def reader_ptx(tmp_path_factory) -> str:
    nvcc = static.find_program("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found (the heap reader is CUDA C++)")
    folder = tmp_path_factory.mktemp("heap")
    (folder / "heap.cu").write_text(HEAP_READER)
    subprocess.run(
        [nvcc, "-ptx", "-arch=sm_90", "-o", "heap.ptx", "heap.cu"],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    )
    return (folder / "heap.ptx").read_text()


@pytest.fixture
def on_device(reader_ptx):
    """read(blocks, words) -> (the words each block's malloc held, failed mallocs), and the
    InternalKernels of the same context."""
    from runner.measurement.timing.cuda import InternalKernels

    with driver.Context(0) as ctx:
        stream = driver.Stream()
        internal = InternalKernels(ctx)
        module = driver.Module(reader_ptx, "heap reader")
        owned = []

        def read(blocks: int, words: int) -> tuple[np.ndarray, int]:
            out, failed = driver.Buffer(8 * blocks * words), driver.Buffer(4)
            owned.extend((out, failed))
            out.fill_bytes(0x3C, stream)
            failed.fill_bytes(0, stream)
            kernel = module.kernel("read_heap", (blocks, 1, 1), (128, 1, 1))
            args = driver.KernelArgs([("ptr", out.ptr), ("u64", words), ("ptr", failed.ptr)])
            kernel.launch(stream, args)
            stream.synchronize()
            return out.download(np.uint64, blocks * words), int(failed.download(np.uint32, 1)[0])

        yield read, internal, stream
        for buffer in owned:
            buffer.free()
        module.unload()
        internal.close()
        stream.destroy()


def test_a_read_of_the_heap_before_a_write_finds_the_poison(on_device):
    read, internal, stream = on_device
    fresh, failed = read(8, 512)
    assert failed == 0
    # the control: what a fresh heap holds is not the poison (the driver hands out zeroed memory)
    assert np.mean(fresh == ALL_ONES) < 0.5, fresh[:8]
    internal.poison_heap(stream)
    stream.synchronize()
    poisoned, failed = read(8, 512)
    assert failed == 0
    # every word the poison filled is all ones; the allocator's own bookkeeping may sit inside
    # a block carved from several freed chunks, so not every single word need be
    assert np.mean(poisoned == ALL_ONES) >= 0.5, poisoned[:16]
    assert np.mean(poisoned == 0) < 0.05, poisoned[:16]


def test_the_poison_gives_the_heap_back(on_device):
    """Every chunk the poison allocates (down to 16-byte fragments) is freed: after it ran five
    times a 4 KiB malloc still succeeds in every block (one leaking run would leave none)."""
    read, internal, stream = on_device
    for _ in range(5):
        internal.poison_heap(stream)
    stream.synchronize()
    held, failed = read(8, 512)
    assert failed == 0, "the heap had no 4 KiB block left after the poison"
    assert np.mean(held == ALL_ONES) >= 0.5, held[:16]
