"""The option axes on whatever card the GPU box lends, drawn as the dashboard draws them.

The suite pins the H200 (`[suite] gpu`), and a trusted ingest refuses a run on another model, so
an option-axis run on an H100 never reaches a history. `measure` (on the GPU box) copies the
suite with `gpu` set to the card it finds, runs every case with an option axis from that copy,
and writes the copy and the result under --out; `chart` (here) ingests the result trusted
against that copy into a fresh history, builds the dashboard and screenshots each option case's
page (Chromium, 1400 x 1000).

    python tools/option_chart.py measure --out $OUT [--bundle .bundle] [--case ID ...]
    python tools/option_chart.py chart DIR --out SITE [--shots DIR]

DIR is measure's --out: DIR/suite/cases.toml (the pinned copy), DIR/option.json (the result).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.definition.manifest import load  # noqa: E402

PIN = re.compile(r'(?m)^gpu\s*=\s*"[^"\n]*"')


def pinned_copy(suite_dir: Path, gpu: str, out: Path) -> Path:
    """A copy of the suite folder `suite_dir` under `out` whose [suite] gpu is `gpu`; its
    cases.toml. Only the first `gpu = "..."` line (the suite table's) changes."""
    shutil.copytree(suite_dir, out, ignore=shutil.ignore_patterns("perf", "__pycache__"))
    manifest = out / "cases.toml"
    text = manifest.read_text()
    suite_at = text.index("[suite]")
    head, tail = text[:suite_at], text[suite_at:]
    pinned, count = PIN.subn(f"gpu = {orjson.dumps(gpu).decode()}", tail, count=1)
    if count != 1:
        raise SystemExit(f'{manifest}: no gpu = "..." line in [suite] to pin')
    manifest.write_text(head + pinned)
    return manifest


def option_cases(manifest: Path) -> list[str]:
    """The ids of the cases of `manifest` that have an option axis ([case.options])."""
    return [c.id for c in load(manifest).cases if c.sweep and c.sweep.options]


def card_name() -> str:
    """The GPU's name as the runner records it (`runner info`'s device.name)."""
    done = subprocess.run(
        [sys.executable, "-m", "runner", "info", "--no-bandwidth"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"option_chart measure: `runner info` found no GPU to pin: {said}")
    return orjson.loads(done.stdout)["device"]["name"]


def measure(args) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    gpu = card_name()
    manifest = pinned_copy(ROOT / "benchmarks", gpu, out / "suite")
    cases = args.case or option_cases(manifest)
    print(f"option_chart: {gpu}; cases {', '.join(cases)}", file=sys.stderr)
    command = [
        sys.executable,
        "-m",
        "runner",
        "bench",
        str(manifest),
        "-o",
        str(out / "option.json"),
    ]
    command += [word for case in cases for word in ("--case", case)]
    if args.bundle:
        command += ["--bundle", str(args.bundle.resolve())]
    return subprocess.run(command, cwd=ROOT).returncode


def chart(args) -> int:
    manifest = args.dir.resolve() / "suite" / "cases.toml"
    result = args.dir.resolve() / "option.json"
    site = args.out.resolve()
    db = site.parent / f"{site.name}.sqlite"
    db.unlink(missing_ok=True)
    harness = [sys.executable, "-m", "harness"]
    ingest = [*harness, "ingest", "--trusted", "--cases", str(manifest), "--db", str(db)]
    subprocess.run([*ingest, str(result)], cwd=ROOT, check=True)
    dashboard = [*harness, "dashboard", "--db", str(db), "--out", str(site)]
    subprocess.run(dashboard, cwd=ROOT, check=True)
    if args.shots:
        for path in shots(site, set(option_cases(manifest)), args.shots):
            print(path)
    return 0


def shots(site: Path, cases: set[str], folder: Path) -> list[Path]:
    """A screenshot of each of `cases`' pages in the built site `site`."""
    from tests.support.browser import Browser
    from tests.support.dashboard_page import read_js_json

    data = read_js_json(site / "data.js", "window.KERNELGAP_DATA = ")
    pages = {c["id"]: c["page"] for c in data["cases"]}
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    with Browser(width=1400, height=1000) as browser:
        for case in sorted(cases & set(pages)):
            browser.open((site / pages[case]).as_uri())
            out.append(browser.screenshot(folder / f"option-{case}.png"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    on_gpu = steps.add_parser("measure", help="on the GPU box: the pinned copy and its run")
    on_gpu.add_argument("--out", type=Path, required=True)
    on_gpu.add_argument("--bundle", type=Path, help="a runner build bundle (carried)")
    on_gpu.add_argument(
        "--case", action="append", help="only these cases (default: every one with an option axis)"
    )
    here = steps.add_parser("chart", help="here: ingest, dashboard, screenshots")
    here.add_argument("dir", type=Path, help="measure's --out, brought back")
    here.add_argument("--out", type=Path, required=True, help="the site's folder")
    here.add_argument("--shots", type=Path, help="a folder for the screenshots")
    args = parser.parse_args()
    return measure(args) if args.step == "measure" else chart(args)


if __name__ == "__main__":
    raise SystemExit(main())
