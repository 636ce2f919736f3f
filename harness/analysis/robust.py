"""The robust verdict of a gap: do the measurement methods agree?

A gap measured hot and cold, or read by CUDA events and by CUPTI, is the same question asked
four ways. Each method has blind spots of its own (hot: graph replay keeps caches warm; cold:
a single launch's placement; events: half-microsecond ticks and their own overhead; CUPTI: the
activity buffer's flush), so a gap is called robust when every method that measured it agrees
with every other within their intervals, and otherwise the verdict says which differ and by how
much. Agreement of two gaps g1, g2 with intervals: |ln g1 - ln g2| <= z sqrt(se1^2 + se2^2),
se the standard error of ln gap each interval implies (protocol.headline.log_standard_error),
the two runs being independent: the verdict protocol.statistics.decide gives that interval.

A method is a series key's mode ("hot", "cold", "cold/cupti", ...); gaps are matched across
documents by the rest of their series key (GPU model, suite and case versions, candidate,
sources), so only the same kernels of the same suite on the same GPU model are compared.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field

from harness.history.series import series_key
from protocol.headline import log_standard_error
from protocol.statistics import Change, Policy, decide

# two methods agree unless the interval of their ratio excludes 1 (any size counts)
AGREEMENT = Policy(min_effect=0.0, alpha=None, interval=True)

__all__ = ["Disagreement", "RobustGap", "robust_gaps"]


@dataclass(frozen=True)
class Disagreement:
    """Two methods whose gaps differ by more than their intervals allow: second / first - 1
    (`relative`) and how many combined standard errors that is (`sigmas`)."""

    first: str
    second: str
    relative: float
    sigmas: float


@dataclass(frozen=True)
class RobustGap:
    """One candidate's gap in one case, as each method measured it, and the verdict."""

    case_id: str
    case_version: int
    candidate: str
    baseline: str
    gaps: dict[str, tuple[float, float, float]]  # method -> (gap, ci_low, ci_high)
    disagreements: tuple[Disagreement, ...] = field(default_factory=tuple)

    @property
    def robust(self) -> bool:
        return not self.disagreements

    def describe(self) -> str:
        """'robust: hot 1.203x, cold 1.198x agree' or 'not robust: cold/cupti +2.1% vs hot
        (4.3 sigma)'."""
        if self.robust:
            methods = ", ".join(f"{m} {g[0]:.4f}x" for m, g in self.gaps.items())
            return f"robust: {methods} agree within their intervals"
        parts = [
            f"{d.second} {d.relative:+.2%} vs {d.first} ({d.sigmas:.1f} sigma)"
            for d in self.disagreements
        ]
        return "not robust: " + "; ".join(parts)

    def to_dict(self) -> dict:
        return {
            "case_id": self.case_id,
            "case_version": self.case_version,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "gaps": {
                m: dict(zip(("gap", "ci_low", "ci_high"), g, strict=True))
                for m, g in self.gaps.items()
            },
            "robust": self.robust,
            "disagreements": [d.__dict__ for d in self.disagreements],
            "verdict": self.describe(),
        }


def robust_gaps(documents: list[dict], confidence: float = 0.95) -> list[RobustGap]:
    """Every gap that at least two methods measured across `documents`, with its verdict.
    The same method in two documents counts twice, labelled 'hot', 'hot #2', ..."""
    z = statistics.NormalDist().inv_cdf((1 + confidence) / 2)
    found: dict[tuple, dict[str, dict]] = {}
    names: dict[tuple, tuple] = {}
    for document in documents:
        for case in document["cases"]:
            if case["status"] != "ok":
                continue
            for name, impl in case["implementations"].items():
                gap = impl.get("gap")
                if not gap:
                    continue
                key = series_key(document, case, name)
                method = key.pop("mode") or "?"
                group = tuple(sorted(key.items()))
                methods = found.setdefault(group, {})
                label, n = method, 1
                while label in methods:
                    n += 1
                    label = f"{method} #{n}"
                methods[label] = gap
                names[group] = (case["id"], case["version"], name, case["baseline"])
    out = []
    for group, methods in found.items():
        if len(methods) < 2:
            continue
        differ = []
        for (a, ga), (b, gb) in itertools.combinations(methods.items(), 2):
            distance = math.log(gb["ratio_of_medians"]) - math.log(ga["ratio_of_medians"])
            se = math.hypot(log_standard_error(ga), log_standard_error(gb))
            ratio = math.exp(distance)
            change = Change(ratio, ratio * math.exp(-z * se), ratio * math.exp(z * se))
            if decide(change, None, True, AGREEMENT) != "same":
                sigmas = abs(distance) / se if se > 0 else math.inf
                differ.append(Disagreement(a, b, math.expm1(distance), sigmas))
        case_id, version, name, baseline = names[group]
        gaps = {m: (g["ratio_of_medians"], g["ci_low"], g["ci_high"]) for m, g in methods.items()}
        out.append(RobustGap(case_id, version, name, baseline, gaps, tuple(differ)))
    out.sort(key=lambda r: (r.case_id, r.candidate))
    return out
