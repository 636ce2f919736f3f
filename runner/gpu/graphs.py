"""CUDA graphs captured from a stream: what hot mode replays (on runner.gpu.driver's checks)."""

from __future__ import annotations

from runner.gpu.driver import CudaError, Stream, check, cu

__all__ = ["Graph"]


class Graph:
    """A CUDA graph captured from whatever `enqueue(stream)` queues on `stream`."""

    def __init__(self, stream: Stream, enqueue):
        d = cu()
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(d.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
        try:
            enqueue(stream)
        except BaseException:
            result = d.cuStreamEndCapture(stream.handle)
            if int(result[0]) == 0 and result[1] is not None:
                d.cuGraphDestroy(result[1])  # the partial graph
            raise
        self.graph = check(d.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        self.exec = None
        try:  # uploaded now, outside any timed region, rather than at its first launch
            self.exec = check(d.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")
            check(d.cuGraphUpload(self.exec, stream.handle), "cuGraphUpload")
            stream.synchronize()
        except CudaError:
            if self.exec is None:
                d.cuGraphDestroy(self.graph)
            self.destroy()
            raise

    def launch(self, stream: Stream) -> None:
        check(cu().cuGraphLaunch(self.exec, stream.handle), "cuGraphLaunch")

    def destroy(self) -> None:
        d = cu()
        if self.exec is not None:
            d.cuGraphExecDestroy(self.exec)
            d.cuGraphDestroy(self.graph)
            self.exec = None
