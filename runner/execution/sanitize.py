"""`runner check --sanitize`: compute-sanitizer over one launch of every implementation at the
check size, each tool in a child process of its own (`python -m runner.execution.profile_launch JOB.json`,
the same one-launch program ncu profiles, with size "check").

A race that happens to give the right answer (a warp-synchronous reduction without a barrier)
passes every correctness check; only racecheck sees it. memcheck sees reads and writes outside
an allocation (each buffer is its own allocation here, without the timing phase's guard bands),
synccheck barriers that not every thread reaches, initcheck reads of memory nobody wrote.
What a run found goes in the `sanitize` document (schemas/sanitize.schema.json).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from runner.errors import SanitizerOutputError
from runner.explain import compute_sanitizer, profiling, static

__all__ = ["Sanitizer", "parse_tools"]

TIMEOUT_S = 600.0
REPO_ROOT = Path(__file__).resolve().parent.parent.parent
REASON_CHARS = 2000


def parse_tools(text: str) -> tuple[str, ...]:
    """`--sanitize-tools memcheck,racecheck` as a tuple; ValueError naming a tool it does not know."""
    names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    unknown = [t for t in names if t not in compute_sanitizer.TOOLS]
    if unknown or not names:
        raise ValueError(
            f"--sanitize-tools: {', '.join(unknown) or '(none given)'} is not a compute-sanitizer "
            f"tool; expected a comma-separated list of {', '.join(compute_sanitizer.TOOLS)}"
        )
    return names


def run_tool(path: str, tool: str, job: dict, timeout_s: float = TIMEOUT_S) -> dict:
    """One tool over one launch: a run entry (status clean, errors or failed)."""
    entry = {"tool": tool}
    t0 = time.monotonic()
    try:
        argv, done, log = profiling.under_tool(
            job,
            lambda driver, log_path: compute_sanitizer.command(path, tool, driver, log_path),
            timeout_s,
            "sanitize",
        )
    except subprocess.TimeoutExpired:
        entry["wall_s"] = time.monotonic() - t0
        return {**entry, "status": "failed", "reason": f"did not finish in {timeout_s:g} s"}
    entry["wall_s"] = time.monotonic() - t0
    cut = argv.index("--log-file")
    entry["command"] = [Path(path).name, *argv[1:cut], *argv[cut + 2 : cut + 6]]
    entry["exit_status"] = done.returncode
    try:
        found = compute_sanitizer.parse(log or done.stdout)
    except SanitizerOutputError as exc:
        said = (done.stderr or done.stdout).strip()[-REASON_CHARS:]
        return {**entry, "status": "failed", "reason": f"{exc}; the program said: {said}"}
    entry.update(found)
    if found["errors"]:
        entry["status"] = "errors"
    elif done.returncode != 0:  # the launch did not happen or did not finish: nothing was checked
        said = (done.stderr or done.stdout).strip()[-REASON_CHARS:]
        entry["status"] = "failed"
        entry["reason"] = f"the one-launch program exited with status {done.returncode}: {said}"
    else:
        entry["status"] = "clean"
    return entry


def _line(run: dict) -> str:
    if run["status"] == "clean":
        warned = f", {run['warnings']} warning(s)" if run.get("warnings") else ""
        return f"{run['tool']} clean{warned}"
    if run["status"] == "failed":
        return f"{run['tool']} did not run: {run['reason'].splitlines()[0]}"
    where = f" in {', '.join(run['kernels'])}" if run["kernels"] else ""
    return f"{run['tool']}: {run['errors']} error(s){where}: {'; '.join(run['kinds'][:3])}"


class Sanitizer:
    """Runs the chosen tools over each built implementation and keeps the document."""

    def __init__(self, suite, tool_names, path: str, device: int = 0, say=print):
        self.suite, self.tools, self.path, self.device, self.say = (
            suite,
            tool_names,
            path,
            device,
            say,
        )
        self.cases: dict[str, dict] = {}

    def implementation(self, case, name: str, entry: str, ptx_text: str) -> bool:
        """Sanitize one implementation with every tool; True when every tool ran clean."""
        job = {
            "manifest": str(Path(self.suite.path).resolve()),
            "case": case.id,
            "impl": name,
            "ptx": ptx_text,
            "device": self.device,
            "size": "check",
        }
        runs = [run_tool(self.path, tool, job) for tool in self.tools]
        case_doc = self.cases.setdefault(
            case.id,
            {
                "id": case.id,
                "check_dims": case.geometry(case.check_dims).dims,
                "implementations": {},
            },
        )
        case_doc["implementations"][name] = {"entry": entry, "runs": runs}
        ok = all(r["status"] == "clean" for r in runs)
        self.say(
            f"{'ok' if ok else 'FAIL':<6}{case.id}/{name}: sanitize: " + "; ".join(map(_line, runs))
        )
        return ok

    def document(self) -> dict:
        from protocol.version import SANITIZE_SCHEMA_VERSION, package_version

        runs = [
            r
            for c in self.cases.values()
            for impl in c["implementations"].values()
            for r in impl["runs"]
        ]
        counts = {s: sum(r["status"] == s for r in runs) for s in ("clean", "errors", "failed")}
        status = "errors" if counts["errors"] else "failed" if counts["failed"] else "clean"
        return {
            "schema_version": SANITIZE_SCHEMA_VERSION,
            "kind": "sanitize",
            "kernelgap_version": package_version(),
            "suite": {"path": str(self.suite.path), "name": self.suite.name},
            "sanitizer": {"path": self.path, "version": static.version(self.path)},
            "tools": list(self.tools),
            "size": "check",
            "device": self.device,
            "status": status,
            "summary": {"runs": len(runs), **counts},
            "cases": list(self.cases.values()),
        }
