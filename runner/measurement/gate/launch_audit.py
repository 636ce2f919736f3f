"""What each cold launch sees and which ones are read back, drawn so a kernel cannot predict it.

A kernel that skips its work on some launches (every k-th one, or whenever it recognises the
poison in its outputs) passes any check that reads back launches at fixed places. Here every
cold launch (sample k, launch j of that sample) gets, from a keyed hash of a per-run secret
(os.urandom) and (k, j):
- a poison byte for its outputs (POISON_CHOICES, not a function of the launch's place),
- a generator seed for its inputs (so a result cached by the inputs' content is never right),
- whether its outputs are read back (with probability AUDIT_FRACTION).
All three are the same for every implementation at (k, j): the sides of a round see the same
inputs, and the audited launch of a candidate is compared with the baseline's launch at the
same (k, j), which ran on the same inputs. The secret is recorded in the document afterwards.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass

import numpy as np

from runner.gpu import generator

AUDIT_FRACTION = 0.1  # of cold launches read back, chosen at random (the old fixed stride: 1/10)


def _finite_nonzero(byte: int) -> bool:
    """Whether `byte` repeated reads as a finite, non-zero value in every float dtype the
    runner's buffers hold (0xFF is NaN in f32 and f64)."""
    floats = [t for t in generator.DTYPES.values() if np.dtype(t).kind == "f"]
    return all(
        np.isfinite(v) and v != 0
        for t in floats
        for v in np.frombuffer(bytes([byte]) * np.dtype(t).itemsize, t)
    )


# Bytes a launch's outputs are poisoned with: never zero (a plausible answer) and never NaN or
# an infinity, which compare by class (NaN where NaN): an output a launch left untouched would
# match an expected NaN, or another launch's leftover of the same poison.
POISON_CHOICES = tuple(b for b in range(256) if _finite_nonzero(b))


def poison_of(draw: int) -> int:
    """The poison byte a 64-bit random `draw` picks from POISON_CHOICES."""
    return POISON_CHOICES[draw % len(POISON_CHOICES)]


def distinct_poisons(count: int, rng: random.Random | None = None) -> list[int]:
    """`count` different poison bytes drawn at random (os.urandom unless `rng` is given), one
    for each launch of a check: outputs a launch left untouched hold its own poison, so they
    differ from every other launch's, leftovers included."""
    return (rng or random.SystemRandom()).sample(POISON_CHOICES, count)


@dataclass(frozen=True)
class LaunchPlan:
    poison: int  # byte the outputs are filled with before the launch
    inputs_seed: int  # 64-bit seed the inputs are generated from before the launch
    audited: bool  # its outputs are read back and compared after it


class LaunchDraws:
    """The per-run random choices of cold launches, keyed by (sample, launch)."""

    def __init__(self, secret: bytes | None = None, fraction: float = AUDIT_FRACTION):
        if not 0 < fraction <= 1:
            raise ValueError(f"LaunchDraws.fraction must be in (0, 1] (got {fraction!r})")
        self.secret = os.urandom(16) if secret is None else bytes(secret)
        self.fraction = fraction

    def _draw(self, what: str, sample: int, launch: int) -> int:
        digest = hashlib.blake2b(
            f"{what}:{sample}:{launch}".encode(), key=self.secret, digest_size=8
        ).digest()
        return int.from_bytes(digest, "little")

    def plan(self, sample: int, launch: int) -> LaunchPlan:
        """The poison, inputs and audit of launch `launch` of sample `sample` (negative samples:
        the probes before the samples, never audited)."""
        return LaunchPlan(
            poison=poison_of(self._draw("poison", sample, launch)),
            inputs_seed=self._draw("inputs", sample, launch),
            audited=sample >= 0 and self._draw("audit", sample, launch) < self.fraction * 2**64,
        )


class SideBySide:
    """Outputs read back after audited launches, each candidate's compared with the baseline's
    launch at the same (sample, launch), whichever of the two ran first in the round.

    `differ(got, expected) -> None | str` says where two launches' outputs differ (buffer,
    element, expected, got). What a key holds is dropped once every side has reported it."""

    def __init__(self, names: list[str], baseline: str, differ):
        self.names, self.baseline, self.differ = list(names), baseline, differ
        self.held: dict[tuple[int, int], dict[str, dict]] = {}
        self.reported: dict[tuple[int, int], int] = {}
        self.audited: dict[str, list[list[int]]] = {n: [] for n in names}

    def add(self, key: tuple[int, int], name: str, outputs: dict) -> list[tuple[str, str]]:
        """Hold `name`'s outputs at `key`; returns (implementation, problem) for every
        candidate that can now be compared with the baseline and differs from it."""
        self.audited[name].append(list(key))
        held = self.held.setdefault(key, {})
        held[name] = outputs
        self.reported[key] = self.reported.get(key, 0) + 1
        problems = []
        if self.baseline in held:
            expected = held[self.baseline]
            for other in [n for n in held if n != self.baseline]:
                found = self.differ(held.pop(other), expected)
                if found:
                    problems.append(
                        (
                            other,
                            f"implementation {other}, cold launch {key[1]} of sample {key[0]} "
                            f"(audited at random): {found}, against baseline {self.baseline}'s "
                            "launch on the same inputs: the launch did not do the work",
                        )
                    )
        if self.reported[key] == len(self.names):
            del self.held[key], self.reported[key]
        return problems
