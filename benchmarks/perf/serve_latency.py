"""Per-request latency of the launch paths: `runner run` (a process per request) against
`runner serve` through KernelClient, locally and over SSH on one connection.

    python benchmarks/perf/serve_latency.py [--requests 1000] [--run-requests 20] [--ssh]

On a GPU box each request launches axpy on 1,024 doubles (16 KiB of data in and out). Without a
GPU every request is answered with an environment error, which still measures the framing and
transport costs. `--ssh` adds the same loop through a real sshd started on 127.0.0.1 for the
run (tests/sshd.py; needs openssh-server). Prints one markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

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


def through_client(client: KernelClient, count: int) -> tuple[float, list[float], str]:
    t0 = time.perf_counter()
    client.start()
    first = client.request(request())
    startup_s = time.perf_counter() - t0
    times = []
    for _ in range(count):
        t = time.perf_counter()
        client.request(request())
        times.append(time.perf_counter() - t)
    client.close()
    return startup_s, times, first["status"] if first["status"] == "ok" else first["phase"]


def per_process(count: int) -> tuple[list[float], str]:
    raw = orjson.dumps(request())
    times, status = [], "?"
    for _ in range(count):
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "runner", "run"], input=raw, capture_output=True, cwd=ROOT
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
    startup, times, status = through_client(KernelClient.local(), args.requests)
    rows.append(("runner serve via KernelClient, local", f"{startup:.3f}", times, status))
    if args.ssh:
        from sshd import running_sshd

        from harness.transport.ssh import SshTarget, SshTransport

        with tempfile.TemporaryDirectory() as tmp, running_sshd(Path(tmp)) as server:
            target = SshTarget.parse(server.url)
            with SshTransport(
                target,
                identity=server.identity,
                known_hosts=server.known_hosts,
                python=sys.executable,
            ) as ssh:
                client = KernelClient.over_ssh(ssh, remote_dir=str(ROOT))
                startup, times, status = through_client(client, args.requests)
                rows.append(
                    (
                        "runner serve via KernelClient, SSH to 127.0.0.1",
                        f"{startup:.3f}",
                        times,
                        status,
                    )
                )
    print("| path | start-up to first answer (s) | requests | median (ms) | p95 (ms) | answers |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, startup, times, status in rows:
        ms = [t * 1e3 for t in times]
        print(
            f"| {name} | {startup} | {len(ms)} | {statistics.median(ms):.2f} | {percentile(ms, 95):.2f} | {status} |"
        )


if __name__ == "__main__":
    main()
