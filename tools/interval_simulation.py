"""Coverage and width of a gap's 95% interval under the sequential rule, simulated on the CPU
through the project's own functions (the A/A control's term, the stopping rule, statistics.gap), one
row per noise model; stdout: a markdown table, progress on stderr.

Each simulated run is an A/A case of runner bench's hot mode: a baseline and a candidate of one
PTX (one load each, each load a placement offset of its own) and the hidden control on
aa_control.CONTROL_LOADS loads, in paired rounds (A B C, then C B A). The rule looks after
FIRST_SAMPLES rounds, then every SEQUENTIAL_STEP, up to ROUNDS; where it stops, the candidate's
interval (the control's term included, as the document gives it) must hold 1.0. The oracle is
the interval a method knowing the model would give at the same rounds: the 2.5% and 97.5%
quantiles of the ratio of medians over many runs. Method: docs/method/interval-simulation.md.

    python tools/interval_simulation.py [--runs 600] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from protocol import statistics
from runner.execution.suite import FIRST_SAMPLES  # the rule's first look, as each version has it
from runner.measurement import aa_control, stats
from runner.measurement.timing import stopping
from runner.measurement.timing.base import ImplTiming, TimingSettings

ROUNDS = 30  # TimingSettings' default samples
ORACLE_RUNS = 20000
RESAMPLES = 2000

# name -> (sample noise sd, load sd, stray share, drift over the run, AR(1) rho, t df)
MODELS = {
    "steady": (1e-3, 3e-4, 0.0, 0.0, 0.0, None),
    "stray rounds 1%": (1e-3, 3e-4, 0.01, 0.0, 0.0, None),
    "stray rounds 3%": (1e-3, 3e-4, 0.03, 0.0, 0.0, None),
    "drift": (1e-3, 3e-4, 0.0, 0.02, 0.0, None),
    "AR(0.8)": (1e-3, 3e-4, 0.0, 0.0, 0.8, None),
    "t(2)": (1e-3, 3e-4, 0.0, 0.0, 0.0, 2),
    "load-dominated": (5e-4, 5e-3, 0.0, 0.0, 0.0, None),
    "load and noise alike": (1e-3, 6e-4, 0.0, 0.0, 0.0, None),
    "noisy samples": (2e-2, 3e-4, 0.0, 0.0, 0.0, None),
}
SIDES = 3  # baseline, candidate, control


def places(rounds: int = ROUNDS) -> np.ndarray:
    """(SIDES, rounds): where each side's r-th sample falls in the run (A B C, then C B A)."""
    out = np.empty((SIDES, rounds), dtype=np.int64)
    for r in range(rounds):
        order = range(SIDES) if r % 2 == 0 else range(SIDES - 1, -1, -1)
        for k, side in enumerate(order):
            out[side, r] = r * SIDES + k
    return out


def simulate(model: str, runs: int, rng) -> np.ndarray:
    """(runs, SIDES, ROUNDS) sample times in seconds of one kernel on every side."""
    noise, load, stray, drift, rho, df = MODELS[model]
    length = SIDES * ROUNDS
    if df is not None:
        sequence = noise * rng.standard_t(df, (runs, length))
    else:
        sequence = rng.normal(0.0, noise, (runs, length))
    if rho:
        e = sequence * np.sqrt(1 - rho**2)
        for t in range(1, length):
            e[:, t] += rho * e[:, t - 1]
        sequence = e
    if drift:
        sequence += rng.uniform(-1, 1, (runs, 1)) * drift * np.linspace(0, 1, length)
    if stray:
        slow = rng.random((runs, length)) < stray
        sequence += slow * np.log1p(rng.uniform(0.05, 0.20, (runs, length)))
    logs = sequence[:, places()]
    logs[:, :2] += rng.normal(0.0, load, (runs, 2, 1))  # the baseline's and candidate's loads
    offsets = rng.normal(0.0, load, (runs, aa_control.CONTROL_LOADS))
    logs[:, 2] += offsets[:, aa_control.loads_of_samples(ROUNDS)]
    return np.exp(logs) * 1e-5


def looks() -> list[int]:
    return [*range(FIRST_SAMPLES, ROUNDS, stopping.SEQUENTIAL_STEP), ROUNDS]


def judged_run(times: np.ndarray) -> tuple[int, str, bool, float]:
    """One run through the rule: (rounds at the stop, what stopped it, whether the candidate's
    interval holds 1.0, its relative half-width)."""
    loads = [int(v) for v in aa_control.loads_of_samples(ROUNDS)]
    control = "b" + aa_control.CONTROL_SUFFIX
    term_of = aa_control.running_term("b", control, 1)
    settings = TimingSettings(samples=ROUNDS, first_samples=FIRST_SAMPLES)
    for n in looks():
        timings = {
            "b": ImplTiming("b", list(times[0, :n])),
            "c": ImplTiming("c", list(times[1, :n])),
            control: ImplTiming(control, list(times[2, :n]), loads=loads[:n]),
        }
        more, outcome = stopping.sequential_more(timings, "b", settings, term_of)
        if not more:
            break
    block = aa_control.document_block(list(times[0, :n]), list(times[2, :n]), loads[:n], 1)
    term = block["systematic"] if block else stats.systematic("hot", float(np.median(times[0])))
    g = statistics.gap(times[0, :n], times[1, :n], resamples=RESAMPLES, systematic=term)
    ratio, low, high = g["ratio_of_medians"], g["ci_low"], g["ci_high"]
    return n, outcome["stopped_by"] or "samples", low <= 1.0 <= high, (high - low) / 2 / ratio


def oracle(model: str, rng) -> dict[int, float]:
    """Per look n: the relative half-width of the central 95% of the ratio of medians."""
    times = simulate(model, ORACLE_RUNS, rng)
    out = {}
    for n in looks():
        ratio = np.median(times[:, 1, :n], axis=1) / np.median(times[:, 0, :n], axis=1)
        low, high = np.percentile(ratio, [2.5, 97.5])
        out[n] = float((high - low) / 2)
    return out


def row(model: str, runs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    ideal = oracle(model, rng)
    times = simulate(model, runs, rng)
    found = [judged_run(t) for t in times]
    widths = np.array([w for *_, w in found])
    against = np.array([w / ideal[n] for n, _, _, w in found])
    stops = {}
    for _, why, _, _ in found:
        stops[why] = stops.get(why, 0) + 1
    return {
        "model": model,
        "coverage": float(np.mean([held for _, _, held, _ in found])),
        "median_half_width": float(np.median(widths)),
        "oracle": float(np.median([ideal[n] for n, *_ in found])),
        "against_oracle": float(np.median(against)),
        "rounds": float(np.mean([n for n, *_ in found])),
        "stops": stops,
    }


def table(rows: list[dict], runs: int) -> str:
    lines = [
        f"| model | coverage ({runs} runs) | median half-width | oracle's | x oracle | "
        "mean rounds | stopped by |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        stops = ", ".join(f"{k} {v}" for k, v in sorted(r["stops"].items()))
        lines.append(
            f"| {r['model']} | {r['coverage']:.3f} | {r['median_half_width']:.3%} | "
            f"{r['oracle']:.3%} | {r['against_oracle']:.2f} | {r['rounds']:.1f} | {stops} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=600, help="simulated runs per model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--models", nargs="*", default=list(MODELS), help="a subset of models")
    args = parser.parse_args(argv)
    print(f"interval_simulation: the runner of {aa_control.__file__}", file=sys.stderr)
    rows = []
    for i, model in enumerate(args.models):
        print(f"interval_simulation: {model} ({args.runs} runs)", file=sys.stderr)
        rows.append(row(model, args.runs, args.seed + 101 * i))
    print(table(rows, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
