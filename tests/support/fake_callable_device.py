"""A CPU stand-in for runner.bench's CUDA device: callables run on numpy arrays, times are
programmed per implementation through tests/support/fake_device.FakeBackend (which records every call).

`per_call_s[name]` is the time of one call, `copy_s[name]` the part of it spent in
device-to-device copies; a case with count_copies=False times the call without that part.
`graphs[name]` programs what the call's captured graph holds ({"nodes": [node types],
"copy_targets": [(address, bytes)], "output_ranges": [(address, bytes)]}), judged by
runner.bench.graph_capture as CallableBackend does; `side_work[name]` stands for work the
device saw outside the timing stream (CallableBackend.findings); `replays[name](*inputs)` gives
what a replay of its captured graph leaves in the outputs (CallableBackend.replayed_outputs).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from runner.bench.graph_capture import graph_problems
from runner.measurement.aa_control import CONTROL_SUFFIX
from tests.support.fake_device import FakeBackend

FIXTURE = Path(__file__).parents[1] / "fixtures" / "result-1.0.0-h200-axpy.json"


class FakeCallableBackend(FakeBackend):
    graph_calls = 100

    def __init__(self, device, impls, case, options):
        counted = case.count_copies
        # the hidden A/A control (`op~aa`) is the op called again: the op's programmed time
        twin = {n: n.removesuffix(CONTROL_SUFFIX) for n in impls}
        times = {
            n: device.per_call_s.get(twin[n], device.default_s)
            + (device.copy_s.get(twin[n], 0.0) if counted else 0.0)
            for n in impls
        }
        super().__init__(
            times,
            noise=device.noise,
            seed=device.seed,
            cold_factor=1.0,
            overhead_s=0.0,
            graph_launches=self.graph_calls,  # the batches the engine is told to make
        )
        self.device, self.impls, self.inputs = device, impls, case.inputs
        self.last = {}  # what each implementation's last timed call returned (recheck)
        self.info = {
            n: {
                "method": "fake clock",
                "method_class": "graph-replay" if options.mode == "hot" else "device",
                "fallback": None,
                "copies": {
                    "known": True,
                    "counted": counted,
                    "per_call": int(n in device.copy_s),
                    "bytes_per_call": 0,
                },
            }
            for n in impls
        }
        for n in device.uncapturable & set(impls):  # as CallableBackend records a failed capture
            self.info[n]["copies"] = {"known": False, "counted": counted}
            self.info[n]["fallback"] = "not capturable: fake"
            if options.mode == "hot":
                self.info[n]["method_class"] = "host-loop"
        for n in device.synchronizing & set(impls):  # timed with the host's latency
            if options.mode == "cold":
                self.info[n]["method_class"] = "host-latency"
        self.refused = {}
        for n, graph in device.graphs.items():
            if n in impls:
                problems = graph_problems(
                    graph["nodes"],
                    graph.get("copy_targets", []),
                    graph.get("output_ranges", []),
                    counted,
                    options.recheck is not False,
                )
                if problems:
                    self.refused[n] = problems
        device.backends.append(self)

    def replayed_outputs(self, name):
        replay = self.device.replays.get(name)
        return None if replay is None else replay(*self.inputs)

    def findings(self, name):
        return self.refused.get(name, []) + self.device.side_work.get(name, [])

    def reset(self, name):
        super().reset(name)
        self.impls[name].do_reset()

    def warmup(self, name, launches):
        super().warmup(name, launches)
        for _ in range(launches):
            self.impls[name].do_reset()
            self.impls[name].call(self.inputs)

    def timed_cold(self, name):
        self.last[name] = self.impls[name].call(self.inputs)
        return super().timed_cold(name)

    def timed_batch(self, name, batch):
        for _ in range(min(batch, 3)):  # a few real calls stand for the batch
            self.last[name] = self.impls[name].call(self.inputs)
        return super().timed_batch(name, batch)

    def last_outputs(self, name):
        return self.last[name]

    def sample_wall_s(self, name):
        return self.device.sample_wall_s

    def close(self):
        self.closed = True


class FakeCallableDevice:
    output_rule = (np.ndarray, None)  # outputs are plain numpy arrays (runner.bench.integrity)

    def __init__(
        self,
        per_call_s=None,
        default_s=1e-5,
        copy_s=None,
        noise=0.0,
        seed=0,
        sample_wall_s=1e-3,
        uncapturable=(),
        graphs=None,
        side_work=None,
        synchronizing=(),
        replays=None,
    ):
        self.per_call_s = dict(per_call_s or {})
        self.copy_s = dict(copy_s or {})
        self.default_s, self.noise, self.seed, self.sample_wall_s = (
            default_s,
            noise,
            seed,
            sample_wall_s,
        )
        self.uncapturable = set(uncapturable)
        self.graphs = dict(graphs or {})
        self.synchronizing = set(synchronizing)
        self.replays = dict(replays or {})
        self.side_work = dict(side_work or {})
        self.backends: list[FakeCallableBackend] = []
        self.calls = 0

    def call(self, fn):
        self.calls += 1
        return fn()

    def environment(self) -> dict:
        env = json.loads(FIXTURE.read_text())["environment"]
        env["toolchains"] = {"python": {"version": "3.11"}}
        return env

    def peaks(self) -> dict:
        return self.environment()["peaks"]

    def backend(self, impls, case, options):
        return FakeCallableBackend(self, impls, case, options)

    def close(self):
        pass
