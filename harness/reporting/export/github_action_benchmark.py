"""github-action-benchmark's `customSmallerIsBetter` format: a JSON array of entries.

Each entry is {"name", "unit", "value", "range", "extra"}; the action charts `value` per `name`
over commits and alerts on a rise, and shows `range` and `extra` as text (it coerces them to
strings, so they are written as strings). Entries:
- `<case>/v<version>/<impl>`: median per-launch time in `us`, range = ± MAD in us;
- `<case>/v<version>/gap/<candidate>`: ratio of medians in `x <baseline>`, range = its 95%
  bootstrap interval;
- `suite/geomean_gap/<candidate>`: geometric-mean gap over the suite's fixed set of cases
  (protocol.headline: unstable ones in, marked), range = its 95% interval and "over k of n".
Every name is a function of (case, version, implementation) alone, never of what else the run
holds (how many candidates a case has, which one is primary, which are unstable): the action
keys its charts and alerts by name, so a name that changed would split a chart and skip an alert
silently. (Before kernelgap 0.1.0 a case's only candidate was `.../gap` and a suite's only
candidate `suite/geomean_gap`.) The primary candidate's suite geomean comes first (a run without
a primary keeps document order, geomeans last). Unstable results are left out: the action alerts
on every entry it gets, and DESIGN.md keeps unstable results out of alerts. `extra` carries the series key (GPU, mode, versions, source hashes), the compiler's
version and sha256 where the build recorded them, the driver and the commit.
"""

from __future__ import annotations

from harness.history.series import series_key
from harness.reporting.summary import geomean_gaps
from harness.reporting.table import lead_first, primary_candidate
from protocol.codec import encode

__all__ = ["entries", "render"]

US_PER_S = 1e6


def _extra(document: dict, key: dict | None = None, **more) -> str:
    env = document["environment"]
    lines = [f"{k}: {v}" for k, v in (key or {}).items()]
    lines += [
        f"gpu: {env['device']['name']}" if key is None else None,
        f"driver: {(env.get('sensors_start') or {}).get('driver_version', 'unknown')}",
        f"cuda: {env['device'].get('driver_version_string', env['device']['driver_version'])}",
        f"suite: {document['suite']['name']} v{document['suite']['version']}",
        f"commit: {document['suite']['commit'] or 'unknown'}",
        f"started_utc: {document['started_utc']}",
    ]
    lines += [f"{k}: {v}" for k, v in more.items()]
    return "\n".join(line for line in lines if line)


def _compiler(impl: dict) -> dict:
    """The compiler's identity for `extra`: metadata of a point, never part of its name."""
    build = impl.get("build") or {}
    found = {
        "compiler_version": build.get("version"),
        "compiler_sha256": build.get("compiler_sha256"),
    }
    return {k: v for k, v in found.items() if v}


def entries(document: dict) -> list[dict]:
    """The entries for one (validated) result document: the primary's suite geomean, then
    document order, the other geomeans last."""
    primary = primary_candidate(document)
    out = []
    baselines = set()
    for case in document["cases"]:
        if case["status"] != "ok":
            continue
        prefix = f"{case['id']}/v{case['version']}"
        impls = case["implementations"]
        for name, impl in impls.items():
            timing = impl.get("timing")
            if not timing or not timing["stats"]["stable"]:
                continue
            stats = timing["stats"]
            key = series_key(document, case, name)
            out.append(
                {
                    "name": f"{prefix}/{name}",
                    "unit": "us",
                    "value": stats["median_s"] * US_PER_S,
                    "range": f"± {stats['mad_s'] * US_PER_S:.4g}",
                    "extra": _extra(
                        document,
                        key,
                        **_compiler(impl),
                        samples=stats["count"],
                        noise=f"{stats['noise']:.3%}",
                    ),
                }
            )
            gap = impl.get("gap")
            if gap and gap["stable"]:
                baselines.add(case["baseline"])
                conf = f"{gap['confidence']:.0%}"
                out.append(
                    {
                        "name": f"{prefix}/gap/{name}",
                        "unit": f"x {case['baseline']}",
                        "value": gap["ratio_of_medians"],
                        "range": f"{gap['ci_low']:.4f} to {gap['ci_high']:.4f} ({conf} CI)",
                        "extra": _extra(document, key, **_compiler(impl), rounds=gap["rounds"]),
                    }
                )
    geomeans = geomean_gaps(document)
    unit = f"x {next(iter(baselines))}" if len(baselines) == 1 else "x baseline"
    suite = []
    for name in lead_first(sorted(geomeans), primary):
        found = geomeans[name]
        cases, of = found["cases"], found["of"]
        over = f"{cases} of {of} cases" if cases != of else f"{cases} case{'s' * (cases != 1)}"
        suite.append(
            {
                "name": f"suite/geomean_gap/{name}",
                "unit": unit,
                "value": found["value"],
                "range": f"{found['ci_low']:.4f} to {found['ci_high']:.4f} over {over}",
                "extra": _extra(document, candidate=name, cases=cases, of=of),
            }
        )
    if primary in geomeans:
        return [suite[0], *out, *suite[1:]]
    return out + suite


def render(document: dict) -> bytes:
    """The entries as a JSON array (UTF-8, indented, newline-terminated)."""
    return encode(entries(document), pretty=True)
