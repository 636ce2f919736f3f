"""Lab script (not a test): a deliberately worse head compiler for a paired base/head run.

Writes OUT/worse-warpforthc, a "compiler revision" that compiles a WarpForth source as warpforthc
does after putting an extra operation in matmul_f64_naive's inner loop (`F* F+` becomes
`F* 2.0 F* 0.5 F* F+`: two exact power-of-two scalings, so the result is bit-identical and the
correctness gate passes, but the k-loop's dependent chain grows by two f64 operations), and
OUT/suite-head/, a copy of the suite whose warpforth implementations are built by it. The
sources stay the same files (same sha256), so a head bundle built from OUT/suite-head pairs with
a base bundle of the suite itself, as two revisions of one compiler do. The edited kernel is
written to OUT/matmul_f64_naive.worse.forth to read.

    python tools/perf/worse_head.py OUT
    python -m runner build benchmarks/cases.toml --out OUT/bundle-base
    python -m runner build OUT/suite-head/cases.toml --out OUT/bundle-head
    python -m harness pr --bundles OUT/bundle-base OUT/bundle-head      # counters, no GPU
then on the GPU box (warpforthc is not needed there: the bundles carry the PTX):
    python -m runner bench benchmarks/cases.toml --bundle base=OUT/bundle-base \
        --bundle head=OUT/bundle-head --profile -o OUT/result.json
    python -m harness pr OUT/result.json --bundles OUT/bundle-base OUT/bundle-head
"""

from __future__ import annotations

import argparse
import shutil
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASE = "matmul_f64_naive"
BEFORE, AFTER = "    F* F+\n", "    F* 2.0 F* 0.5 F* F+\n"  # the inner loop's multiply-add

WRAPPER = f'''#!/usr/bin/env python3
"""warpforthc with an extra operation in {CASE}'s inner loop (tools/perf/worse_head.py)."""
import os, subprocess, sys, tempfile
args = sys.argv[1:]
if args and args[0].endswith(".forth") and os.path.basename(args[0]) == "{CASE}.forth":
    text = open(args[0]).read()
    assert {BEFORE!r} in text, "the inner loop is not where it was: update tools/perf/worse_head.py"
    folder = tempfile.mkdtemp(prefix="worse-head-")
    args[0] = os.path.join(folder, "{CASE}.forth")
    open(args[0], "w").write(text.replace({BEFORE!r}, {AFTER!r}))
sys.exit(subprocess.run(["warpforthc", *args]).returncode)
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--suite", type=Path, default=ROOT / "benchmarks" / "cases.toml")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    wrapper = out / "worse-warpforthc"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    suite_dir = args.suite.resolve().parent
    head = out / "suite-head"
    shutil.copytree(suite_dir, head, dirs_exist_ok=True, ignore=shutil.ignore_patterns("perf"))
    cases = head / args.suite.name
    text = cases.read_text()
    if 'command = "warpforthc {source}"' not in text:
        print(f"error: {args.suite}: no warpforth implementation to rebuild", file=sys.stderr)
        return 2
    cases.write_text(
        text.replace('command = "warpforthc {source}"', f'command = "{wrapper} {{source}}"')
    )
    kernel = (suite_dir / "kernels" / f"{CASE}.forth").read_text()
    (out / f"{CASE}.worse.forth").write_text(kernel.replace(BEFORE, AFTER))
    print(f"{wrapper}\n{cases}\n{out / f'{CASE}.worse.forth'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
