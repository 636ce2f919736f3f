"""Captured calls for runner.bench.cuda_device: a torch CUDA graph of a callable's calls, and a
call that keeps its outputs (recheck)."""

from __future__ import annotations

from runner.gpu import driver

__all__ = ["CapturedGraph", "Kept", "OutputViews"]


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
    graphs are (runner.gpu.graphs)."""

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
