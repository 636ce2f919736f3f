"""How long `runner run` takes to check a request with many array values (no GPU needed).

    python tools/perf/request_parse.py [--sizes 1000,100000,1000000]

Prints, per size, the wall time of oneshot.parse_request (JSON decode, schema check of the
structure, one pass over the value types, numpy conversion and range checks) for an f64[] and
an i64[] parameter of that many values.
"""

from __future__ import annotations

import argparse
import base64
import time

import orjson

from runner.launch import oneshot


def request(kind: str, n: int) -> bytes:
    values = [i * 0.5 for i in range(n)] if kind == "f64" else list(range(-n // 2, n - n // 2))
    return orjson.dumps(
        {
            "ptx_base64": base64.b64encode(b".version 7.0\n.target sm_75\n").decode(),
            "kernel": "main",
            "grid": [1],
            "block": [32],
            "params": [{"type": f"{kind}[]", "values": values}],
            "outputs": [{"param": 0}],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    args = parser.parse_args()
    print("| values | kind | request MB | parse_request s |\n| ---: | --- | ---: | ---: |")
    for n in (int(x) for x in args.sizes.split(",")):
        for kind in ("f64", "i64"):
            raw = request(kind, n)
            t0 = time.perf_counter()
            oneshot.parse_request(raw)
            print(f"| {n} | {kind} | {len(raw) / 1e6:.1f} | {time.perf_counter() - t0:.3f} |")


if __name__ == "__main__":
    main()
