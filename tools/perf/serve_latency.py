"""Per-request latency of the launch paths: `runner run` (a process per request) against
`runner serve` through KernelClient, locally and over SSH on one connection.

    python tools/perf/serve_latency.py [--requests 1000] [--run-requests 20] [--ssh]

On a GPU box each request launches axpy on 1,024 doubles (16 KiB of data in and out). Without a
GPU every request is answered with an environment error, which still measures the framing and
transport costs. `--ssh` adds a client through a real sshd started on 127.0.0.1 for the run
(tests/support/sshd.py; needs openssh-server): the local and the SSH client are both started and take
turns, request by request, so that both meet the same machine, and the figure SSH adds is the
median of the paired differences. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.client import KernelClient, _param  # noqa: E402

AXPY = (ROOT / "benchmarks" / "kernels" / "axpy_f64.handwritten.ptx").read_text()
N = 1024


def request() -> dict:
    x, y = np.arange(N, dtype=np.float64), np.ones(N)
    return {
        "ptx": AXPY,
        "kernel": "axpy_f64",
        "grid": [4],
        "block": [256],
        "params": [_param(x), _param(y), _param(("f64", 2.5)), _param(("u64", N))],
        "outputs": [{"param": 1, "encoding": "base64"}],
    }


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def started(client: KernelClient) -> tuple[float, str]:
    """Seconds from start to the first answer, and what that answer was."""
    t0 = time.perf_counter()
    client.start()
    first = client.request(request())
    return time.perf_counter() - t0, first["status"] if first["status"] == "ok" else first["phase"]


def timed(client: KernelClient) -> float:
    t = time.perf_counter()
    client.request(request())
    return time.perf_counter() - t


def taking_turns(clients: list[KernelClient], count: int) -> list[list[float]]:
    """`count` requests on each client, one on each in turn, the order alternating."""
    times: list[list[float]] = [[] for _ in clients]
    for index in range(count):
        order = range(len(clients)) if index % 2 == 0 else reversed(range(len(clients)))
        for which in order:
            times[which].append(timed(clients[which]))
    return times


def per_process(count: int) -> tuple[list[float], str]:
    raw = orjson.dumps(request())
    times, status = [], "?"
    for _ in range(count):
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "runner", "run", "--no-service"],
            input=raw,
            capture_output=True,
            cwd=ROOT,
        )
        times.append(time.perf_counter() - t)
        answer = orjson.loads(done.stdout)
        status = answer["status"] if answer["status"] == "ok" else answer["phase"]
    return times, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--run-requests", type=int, default=20)
    parser.add_argument("--ssh", action="store_true")
    args = parser.parse_args()
    rows = []
    times, status = per_process(args.run_requests)
    rows.append(("runner run, a process per request", "-", times, status))
    with contextlib.ExitStack() as stack:
        local = KernelClient.local()
        stack.callback(local.close)  # also when the SSH side fails to come up
        startup, status = started(local)
        row = ("runner serve via KernelClient, local", f"{startup:.3f}")
        added = None
        if not args.ssh:
            rows.append((*row, taking_turns([local], args.requests)[0], status))
        else:
            from harness.running.transport.ssh import SshTarget, SshTransport
            from tests.support.sshd import running_sshd

            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            server = stack.enter_context(running_sshd(Path(tmp)))
            ssh = stack.enter_context(
                SshTransport(
                    SshTarget.parse(server.url),
                    identity=server.identity,
                    known_hosts=server.known_hosts,
                    python=sys.executable,
                )
            )
            remote = KernelClient.over_ssh(ssh, remote_dir=str(ROOT))
            stack.callback(remote.close)
            ssh_startup, ssh_status = started(remote)
            near, far = taking_turns([local, remote], args.requests)
            rows.append((*row, near, status))
            rows.append(("runner serve via KernelClient, SSH to 127.0.0.1", f"{ssh_startup:.3f}",
                         far, ssh_status))  # fmt: skip
            added = statistics.median(f - n for n, f in zip(near, far, strict=True)) * 1e3
    print("| path | start-up to first answer (s) | requests | median (ms) | p95 (ms) | answers |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, startup, times, status in rows:
        ms = [t * 1e3 for t in times]
        print(
            f"| {name} | {startup} | {len(ms)} | {statistics.median(ms):.2f} | {percentile(ms, 95):.2f} | {status} |"
        )
    if added is not None:
        print(f"\nSSH adds {added:.2f} ms per request (median of the paired differences)")


if __name__ == "__main__":
    main()
