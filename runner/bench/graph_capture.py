"""Captured calls for runner.bench.cuda_device: a torch CUDA graph of a callable's calls, a call
that keeps its outputs (recheck), and what a captured graph holds, judged before anything is
timed (graph_problems).

Hot samples replay the graph of a call, not the call: what the graph does not hold is not
timed. Three contents make a row's time stand for less than the op's work, and refuse it:
- an empty graph: the call launched nothing on the timing stream while it was captured (its
  work went to another stream, such as the legacy default stream, or was done on the host, or
  the call does nothing while a capture is under way); replayed, it reads x0.000;
- a graph of copies only, with copies left out of the time (count_copies=False): nothing of it
  would be timed (a result kept from an earlier call and copied out); with copies counted it is
  timed as the copies it is, and only with recheck, which verifies its outputs on fresh inputs;
- a copy that writes an output, with copies left out: the output is made by untimed work.
"""

from __future__ import annotations

from runner.gpu import driver

__all__ = [
    "WORK_NODES",
    "CapturedGraph",
    "Kept",
    "OutputViews",
    "graph_problems",
]


def _type_name(node_type) -> str:
    """CU_GRAPH_NODE_TYPE_KERNEL -> KERNEL."""
    return getattr(node_type, "name", str(node_type)).removeprefix("CU_GRAPH_NODE_TYPE_")


def _destination(params) -> int:
    """The first device address a memcpy node's CUDA_MEMCPY3D parameters write (0 when its
    destination is not plain device memory)."""
    try:
        base = int(params.dstDevice)
    except (TypeError, ValueError):
        return 0
    pitch = int(params.dstPitch) or int(params.WidthInBytes)
    rows = int(params.dstY) + int(params.dstZ) * max(1, int(params.dstHeight))
    return base + int(params.dstXInBytes) + rows * pitch


class CapturedGraph:
    """A torch CUDA graph of `calls` calls, with its copies counted (and optionally disabled).
    `device` is a runner.bench.cuda_device.CudaDevice. With `upload`, the instance is uploaded
    to the device as it is made (torch's instantiate does not call cuGraphUpload, so otherwise
    its first launch uploads it, inside whatever window times that launch), as the PTX runner's
    graphs are (runner.gpu.driver.Graph)."""

    def __init__(self, device, run, calls: int, disable_copies: bool, pool=None, upload=True):
        torch = device.torch
        self.graph = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(self.graph, pool=pool, stream=device.torch_stream):
            for _ in range(calls):
                run()
        # where the last call's outputs live: every replay writes them there (recheck reads them)
        self.outputs = OutputViews(torch, getattr(run, "last", None))
        if isinstance(run, Kept):
            run.last = (
                None  # freed into the pool as a plain capture's are: the next graph reuses them
            )
        self.graph.instantiate()
        d = driver.cu()
        raw = d.CUgraph(self.graph.raw_cuda_graph())
        _, count = driver.check(d.cuGraphGetNodes(raw, 0), "cuGraphGetNodes")
        nodes, _ = driver.check(d.cuGraphGetNodes(raw, count), "cuGraphGetNodes")
        types = [driver.check(d.cuGraphNodeGetType(node), "cuGraphNodeGetType") for node in nodes]
        self.node_types = [_type_name(t) for t in types]
        copy_type = d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY
        self.copies, self.copy_bytes = 0, 0
        self.copy_targets: list[tuple[int, int]] = []  # (device address, bytes) each copy writes
        exec_handle = d.CUgraphExec(self.graph.raw_cuda_graph_exec()) if disable_copies else None
        for node, kind in zip(nodes, types, strict=True):
            if kind != copy_type:
                continue
            params = driver.check(d.cuGraphMemcpyNodeGetParams(node), "cuGraphMemcpyNodeGetParams")
            self.copies += 1
            size = int(params.WidthInBytes) * max(1, int(params.Height)) * max(1, int(params.Depth))
            self.copy_bytes += size
            self.copy_targets.append((_destination(params), size))
            if exec_handle is not None:  # a disabled node is an empty node: dependencies stay
                driver.check(d.cuGraphNodeSetEnabled(exec_handle, node, 0), "cuGraphNodeSetEnabled")
        self.copies //= calls
        self.copy_bytes //= calls
        if upload:  # after the nodes are disabled: an upload covers the instance as it runs
            exec_raw = d.CUgraphExec(self.graph.raw_cuda_graph_exec())
            driver.check(d.cuGraphUpload(exec_raw, device.stream.handle), "cuGraphUpload")
            device.stream.synchronize()

    def replay(self) -> None:
        self.graph.replay()

    def close(self) -> None:
        self.graph.reset()


class OutputViews:
    """The places of a captured call's output tensors (address, shape, strides, dtype), without
    holding them: a captured call's outputs are freed into the comparison's pool as its capture
    ends, so the next graph gets the same blocks and identical implementations write the same
    addresses (cuda_device's module docstring). `tensors()` views those places again, right
    after a replay of this graph, before any other graph of the pool has run."""

    def __init__(self, torch, outputs):
        self.torch = torch
        self.single = outputs is not None and not isinstance(outputs, tuple | list)
        items = () if outputs is None else (outputs,) if self.single else tuple(outputs)
        self.places = [_place(torch, x) for x in items]
        self.kept = [
            x if place is None else None for x, place in zip(items, self.places, strict=True)
        ]

    def ranges(self) -> list[tuple[int, int]]:
        """(first address, bytes) each output tensor spans."""
        return [(p[0], p[4]) for p in self.places if p is not None]

    def tensors(self):
        views = tuple(
            kept if place is None else _view(self.torch, place)
            for kept, place in zip(self.kept, self.places, strict=True)
        )
        return views[0] if self.single else views


def _place(torch, x):
    """(address, shape, byte strides, dtype, bytes spanned) of a plain CUDA tensor whose items
    can be viewed as unsigned integers, else None (the object itself is kept)."""
    if type(x) is not torch.Tensor or not x.is_cuda or x.element_size() not in (1, 2, 4, 8):
        return None
    if x.numel() == 0:
        return None
    size = x.element_size()
    last = sum((n - 1) * st for n, st in zip(x.shape, x.stride(), strict=True))
    span = (1 + last) * size
    strides = tuple(st * size for st in x.stride())
    return (x.data_ptr(), tuple(x.shape), strides, x.dtype, span)


# integer types of each item size that torch has long read from __cuda_array_interface__; the
# view then takes the output's own dtype (same size)
RAW_TYPES = {1: "|u1", 2: "<i2", 4: "<i4", 8: "<i8"}


class _CudaArray:
    def __init__(self, ptr: int, shape: tuple, strides: tuple, itemsize: int):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "strides": strides,
            "typestr": RAW_TYPES[itemsize],
            "data": (ptr, False),
            "version": 2,
        }


def _view(torch, place):
    ptr, shape, strides, dtype, _span = place
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = torch.as_tensor(_CudaArray(ptr, shape, strides, itemsize), device="cuda")
    return raw.view(dtype)


class Kept:
    """A call that keeps what it returned (recheck verifies the outputs of a timed sample)."""

    def __init__(self, call):
        self.call, self.last = call, None

    def __call__(self):
        self.last = self.call()
        return self.last


# What a captured call's graph holds, judged before anything is timed (see the module
# docstring): pure functions of its node types and copy destinations, so they are tested on
# the CPU.


# Graph nodes that compute on the device; a memcpy is a copy, the rest (empty, event, wait, host
# function, allocation) do no device work of the call's own
WORK_NODES = frozenset({"KERNEL", "MEMSET", "GRAPH", "CONDITIONAL", "BATCH_MEM_OP"})


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[1] > 0 and b[1] > 0 and a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def graph_problems(
    node_types: list[str],
    copy_targets: list[tuple[int, int]],
    output_ranges: list[tuple[int, int]],
    count_copies: bool,
    recheck: bool,
) -> list[str]:
    """Why a 1-call graph of `node_types` (KERNEL, MEMCPY, ...) cannot stand for the call's
    work; `copy_targets` are the (address, bytes) its memcpy nodes write, `output_ranges` the
    (address, bytes) of the call's outputs. Empty when the graph is fine."""
    if not node_types:
        return [
            "its captured CUDA graph is empty: the call launched no work on the timing stream "
            "while it was captured (work on another stream, such as the legacy default stream, "
            "a result made on the host, or a call that does nothing while a CUDA graph is being "
            "captured), so its replays would time nothing"
        ]
    work = sum(t in WORK_NODES for t in node_types)
    copies = sum(t == "MEMCPY" for t in node_types)
    if not work and copies and not count_copies:
        return [
            f"its captured CUDA graph holds only copies ({copies}), which the case leaves out of "
            "the time, so nothing of the call would be timed (a result kept from an earlier call "
            "and copied out); declare count_copies=True if copying is the op"
        ]
    if not work:
        if copies and recheck:
            return []
        kinds = ", ".join(sorted(set(node_types)))
        what = f"only copies ({copies})" if copies else f"no device work (nodes: {kinds})"
        return [
            f"its captured CUDA graph holds {what}; such a call is timed only with recheck on, "
            "which verifies its outputs on fresh inputs"
        ]
    if count_copies:
        return []
    written = [
        i
        for i, out in enumerate(output_ranges)
        if any(_overlaps(target, out) for target in copy_targets)
    ]
    if not written:
        return []
    size = sum(
        b for t, b in copy_targets if any(_overlaps((t, b), output_ranges[i]) for i in written)
    )
    return [
        f"copies in its captured CUDA graph write output(s) {written} ({size} bytes), and the case "
        "leaves copies out of the time: an output made by a copy (a result kept and copied out) "
        "is not timed work; declare count_copies=True to time the copies"
    ]
