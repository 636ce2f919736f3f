"""False alerts and detection delay of `harness regressions`' per-series rule, simulated on
the CPU through the project's own function (harness.analysis.regressions.review_series, the
newest point and the window the store would hand it); stdout: a markdown table, progress on
stderr.

False alerts: series of RUNS runs with no step under each noise model, every run judged as it
arrives; the rate is alerts per 1,000 runs of one series. Detection: a step of 2% or 5% after
run STEP_AT; the share of series alerting, in the step's direction, within 10 runs of it.
Noise is relative and sigma-scaled (1.4826 x MAD of the model's values is the stated noise).
Method: docs/method/alerts.md.

    python tools/alert_simulation.py [--series 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from harness.analysis import regressions

RUNS = 1000
STEP_AT = 500
WITHIN = 10
T3_SCALE = 1 / (1.4826 * 0.7649)  # t(3)'s MAD is 0.7649: scaled so 1.4826 x MAD is the noise

# name -> (noise, model)
FALSE_ALARM_MODELS = {
    "normal 0.3%": (0.003, "normal"),
    "normal 1%": (0.01, "normal"),
    "normal 2%": (0.02, "normal"),
    "t(3) 1%": (0.01, "t3"),
    "t(3) 2%": (0.02, "t3"),
    "AR(0.5) 1%": (0.01, "ar0.5"),
    "AR(0.5) 2%": (0.02, "ar0.5"),
}
# name -> (step, noise, required share alerted within WITHIN runs)
DETECTION = {
    "2% step, 0.3% noise": (0.02, 0.003, 0.90),
    "2% step, 0.5% noise": (0.02, 0.005, 0.90),
    "5% step, 1% noise": (0.05, 0.01, 0.95),
    "5% step, 2% noise": (0.05, 0.02, 0.95),
}
SERIES = {"series_id": "s", "label": "s", "case_id": "c", "impl": "i", "role": "baseline"}


def noise_series(noise: float, model: str, length: int, rng) -> np.ndarray:
    """Relative values 1 + noise of one series, length runs."""
    if model == "normal":
        e = rng.normal(0.0, noise, length)
    elif model == "t3":
        e = noise * T3_SCALE * rng.standard_t(3, length)
    elif model == "ar0.5":
        e = rng.normal(0.0, noise * np.sqrt(1 - 0.25), length)
        for t in range(1, length):
            e[t] += 0.5 * e[t - 1]
    else:
        raise ValueError(model)
    return np.exp(e)


def judged(values: np.ndarray, at: int, policy: regressions.Policy) -> regressions.Finding:
    """The rule's finding for run `at`, given the window before it as the store hands it."""
    start = max(0, at - policy.window)
    points = [
        {"median_s": float(v), "stable": True, "run_id": str(k), "commit_sha": None}
        | {"started_utc": "", "gpu_uuid": "g"}
        for k, v in enumerate(values[start : at + 1], start)
    ]
    return regressions.review_series(SERIES, points, policy)[0]


def false_alarms(noise: float, model: str, series: int, policy, rng) -> float:
    alerts = 0
    for _ in range(series):
        values = noise_series(noise, model, RUNS, rng)
        alerts += sum(judged(values, t, policy).alert for t in range(policy.min_history, RUNS))
    return alerts / series * 1000 / RUNS


def detected(step: float, noise: float, series: int, policy, rng) -> tuple[float, float]:
    """(share of series alerting slower within WITHIN runs of the step, median runs taken)."""
    hits, delays = 0, []
    for _ in range(series):
        values = noise_series(noise, "normal", STEP_AT + WITHIN, rng)
        values[STEP_AT:] *= 1 + step
        for t in range(STEP_AT, STEP_AT + WITHIN):
            found = judged(values, t, policy)
            if found.alert and found.direction == "slower":
                hits += 1
                delays.append(t - STEP_AT + 1)
                break
    return hits / series, float(np.median(delays)) if delays else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=20, help="series per no-step model")
    parser.add_argument("--steps", type=int, default=400, help="series per step model")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    policy = regressions.Policy()
    print(f"alert_simulation: the rule of {regressions.__file__}", file=sys.stderr)
    lines = [
        f"| model | false alerts per 1,000 runs ({args.series} series of {RUNS}) |",
        "|---|---|",
    ]
    for name, (noise, model) in FALSE_ALARM_MODELS.items():
        print(f"alert_simulation: {name}", file=sys.stderr)
        lines.append(f"| {name} | {false_alarms(noise, model, args.series, policy, rng):.2f} |")
    lines += [
        "",
        f"| step | alerted within {WITHIN} runs ({args.steps} series) | required | median runs |",
        "|---|---|---|---|",
    ]
    for name, (step, noise, required) in DETECTION.items():
        print(f"alert_simulation: {name}", file=sys.stderr)
        share, delay = detected(step, noise, args.steps, policy, rng)
        lines.append(f"| {name} | {share:.1%} | >= {required:.0%} | {delay:g} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
