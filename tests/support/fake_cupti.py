"""A stand-in for cupti-python (`from cupti import cupti`): activity buffers flushed on demand
and driver-API callbacks for cuLaunchKernel, as runner.measurement.timing.cupti and
runner.measurement.timing.cupti use them. `launch(function, name, stream)` plays one
cuLaunchKernel: it calls the subscriber at API_ENTER when the callback is enabled, and queues
a kernel record with the launch's correlation id."""

from __future__ import annotations

import types


class FakeCupti:
    def __init__(self, stream_id: int = 7):
        ns = types.SimpleNamespace
        self.clock, self.pending, self.flushes, self.completed = 1_000, [], 0, None
        self.subscriber, self.enabled, self.next_id = None, set(), 100
        self.ActivityKind = ns(CONCURRENT_KERNEL=1, MEMCPY=2, MEMSET=3)
        self.DriverApiTraceCbid = ns(cuLaunchKernel=13, cuLaunchKernel_ptsz=442)
        self.CallbackDomain = ns(DRIVER_API=1)
        self.ApiCallbackSite = ns(API_ENTER=0, API_EXIT=1)
        self.stream_id = stream_id
        self._params = {}
        outer = self

        class CuLaunchKernelParams:
            @staticmethod
            def from_ptr(ptr, owner=None):
                return ns(f=outer._params[ptr])

        self.CuLaunchKernelParams = CuLaunchKernelParams

    # activity API
    def get_stream_id_ex(self, context, stream, flag):
        return self.stream_id

    def get_timestamp(self):
        return self.clock

    def activity_register_callbacks(self, requested, completed):
        self.completed = completed

    def activity_enable(self, kind):
        pass

    def activity_disable(self, kind):
        pass

    def activity_flush_all(self, flag):
        self.flushes += 1
        self.completed(list(self.pending))
        self.pending.clear()

    # callback API
    def subscribe(self, callback, userdata):
        if self.subscriber is not None:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        self.subscriber = (callback, userdata)
        return 1

    def unsubscribe(self, handle):
        self.subscriber, self.enabled = None, set()

    def enable_callback(self, on, handle, domain, cbid):
        (self.enabled.add if on else self.enabled.discard)(cbid)

    def launch(self, function: int, name: str, stream: int | None = None, start: int = 2_000):
        """One cuLaunchKernel of `function`; its record starts at `start` ns."""
        self.next_id += 1
        cid = self.next_id
        cbid = self.DriverApiTraceCbid.cuLaunchKernel
        if self.subscriber is not None and cbid in self.enabled:
            self._params[cid] = function
            data = types.SimpleNamespace(function_params=cid, callback_site=0, correlation_id=cid)
            self.subscriber[0](self.subscriber[1], 1, cbid, data)
        self.pending.append(
            types.SimpleNamespace(
                start=start,
                end=start + 100,
                name=name,
                stream_id=self.stream_id if stream is None else stream,
                correlation_id=cid,
            )
        )
        return cid
