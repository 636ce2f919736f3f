"""Captured calls for runner.bench.cuda_device: a torch CUDA graph of a callable's calls, and a
call that keeps its outputs (recheck)."""

from __future__ import annotations

from runner.gpu import driver

__all__ = ["CapturedGraph", "Kept"]


class CapturedGraph:
    """A torch CUDA graph of `calls` calls, with its copies counted (and optionally disabled).
    `device` is a runner.bench.cuda_device.CudaDevice."""

    def __init__(self, device, run, calls: int, disable_copies: bool, pool=None):
        torch = device.torch
        self.graph = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(self.graph, pool=pool, stream=device.torch_stream):
            for _ in range(calls):
                run()
        self.outputs = getattr(run, "last", None)  # recheck: the last call's (static) outputs
        self.graph.instantiate()
        d = driver.cu()
        raw = d.CUgraph(self.graph.raw_cuda_graph())
        _, count = driver.check(d.cuGraphGetNodes(raw, 0), "cuGraphGetNodes")
        nodes, _ = driver.check(d.cuGraphGetNodes(raw, count), "cuGraphGetNodes")
        copy_type = d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY
        self.copies, self.copy_bytes = 0, 0
        exec_handle = d.CUgraphExec(self.graph.raw_cuda_graph_exec()) if disable_copies else None
        for node in nodes:
            if driver.check(d.cuGraphNodeGetType(node), "cuGraphNodeGetType") != copy_type:
                continue
            params = driver.check(d.cuGraphMemcpyNodeGetParams(node), "cuGraphMemcpyNodeGetParams")
            self.copies += 1
            self.copy_bytes += (
                int(params.WidthInBytes) * max(1, int(params.Height)) * max(1, int(params.Depth))
            )
            if exec_handle is not None:  # a disabled node is an empty node: dependencies stay
                driver.check(d.cuGraphNodeSetEnabled(exec_handle, node, 0), "cuGraphNodeSetEnabled")
        self.copies //= calls
        self.copy_bytes //= calls

    def replay(self) -> None:
        self.graph.replay()

    def close(self) -> None:
        self.graph.reset()


class Kept:
    """A call that keeps what it returned (recheck verifies the outputs of a timed sample)."""

    def __init__(self, call):
        self.call, self.last = call, None

    def __call__(self):
        self.last = self.call()
        return self.last
