"""Two labelled PTX bundles of a small suite, as two revisions of a compiler would build them.

The suite is tests/gpu_suite's scale_aa and scale_double_work cases. The base bundle is what
`runner build` writes. The head bundle is a copy in which scale_aa's candidate `cuda_again` was
"recompiled" into twice the work (its PTX's `scale_f64` entry swapped with `scale_f64_twice`, the
same result in two passes) while scale_double_work's candidate `twice` is left as it was. So a
base/head run must read head/base about 2 on scale_aa and 1.000 within its interval on
scale_double_work.

Run as a script it writes the suite and both bundles for the command line:

    python tests/support/revision_bundles.py OUT [--arch sm_90]
    python -m runner bench OUT/cases.toml --bundle base=OUT/bundle-base \\
        --bundle head=OUT/bundle-head -o OUT/result.json
    python -m harness pr OUT/result.json
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
GPU_SUITE = ROOT / "tests" / "gpu_suite"
CASES = ("scale_aa", "scale_double_work")
SLOWED = ("scale_aa", "cuda_again")  # the (case, candidate) whose head does twice the work


def pair_suite(out: Path) -> Path:
    """tests/gpu_suite with only CASES, under out/; the path of its cases.toml."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("kernels", "reference.py"):
        source = GPU_SUITE / name
        if source.is_dir():
            shutil.copytree(source, out / name, dirs_exist_ok=True)
        else:
            shutil.copy2(source, out / name)
    text = (GPU_SUITE / "cases.toml").read_text()
    head, *blocks = text.split("[[case]]\n")
    kept = [b for b in blocks if re.search(rf'^id = "({"|".join(CASES)})"$', b, re.M)]
    head = head.replace('name = "kernelgap-gpu-tests"', 'name = "kernelgap-pair-tests"')
    (out / "cases.toml").write_text(head + "".join(f"[[case]]\n{b}" for b in kept))
    return out / "cases.toml"


def twice_the_work(ptx: str) -> str:
    """The same module with entry `scale_f64` doing two passes (its body is scale_f64_twice's)."""
    ptx = re.sub(r"\bscale_f64\b", "scale_f64_once", ptx)
    return re.sub(r"\bscale_f64_twice\b", "scale_f64", ptx)


def derive_head(base: Path, head: Path, edits: dict[tuple[str, str], object]) -> None:
    """head/ = a copy of bundle base/ with the PTX of each (case, impl) in `edits` rewritten by
    its function, and bundle.json's ptx_sha256 updated to match."""
    shutil.copytree(base, head)
    manifest = orjson.loads((head / "bundle.json").read_bytes())
    for entry in manifest["implementations"]:
        edit = edits.get((entry["case"], entry["impl"]))
        if edit is None:
            continue
        path = head / entry["file"]
        text = edit(path.read_text())
        path.write_text(text)
        entry["build"]["ptx_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (head / "bundle.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


def build_pair(out: Path, arch: str = "sm_90") -> tuple[Path, Path, Path]:
    """(cases.toml, base bundle, head bundle) under out/, built with the suite's real nvcc."""
    from runner.definition import manifest
    from runner.definition.bundle import write_bundle

    cases = pair_suite(out / "suite")
    built = write_bundle(manifest.load(cases), arch, out / "bundle-base")
    if built["failures"] or built["skipped"]:
        raise RuntimeError(f"building the base bundle failed: {built['skipped']}")
    derive_head(out / "bundle-base", out / "bundle-head", {SLOWED: twice_the_work})
    return cases, out / "bundle-base", out / "bundle-head"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    cases, base, head = build_pair(args.out, args.arch)
    print(f"suite {cases}\nbase bundle {base}\nhead bundle {head}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
