"""`python -m runner.gpu.device [--check] [--nvcc PATH]`: rebuild kernels.ptx from kernels.cu."""

from __future__ import annotations

import argparse
import sys

from runner.gpu.device import KERNELS_PTX, recorded_sha256, regenerate, source_sha256


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runner.gpu.device",
        description="Rebuild runner/gpu/device/kernels.ptx from kernels.cu with nvcc.",
    )
    parser.add_argument("--nvcc", default="nvcc", help="nvcc to run (default: nvcc on PATH)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only report whether kernels.ptx matches kernels.cu (exit 1 if not)",
    )
    args = parser.parse_args(argv)
    if args.check:
        try:
            recorded, current = recorded_sha256(), source_sha256()
        except (OSError, ValueError) as error:
            print(error)
            return 1
        if recorded != current:
            print(f"{KERNELS_PTX} is stale: built from {recorded}, source is {current}")
            return 1
        print(f"{KERNELS_PTX} is up to date ({current})")
        return 0
    try:
        regenerate(args.nvcc)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {KERNELS_PTX} (source sha256 {source_sha256()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
