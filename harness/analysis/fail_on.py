"""`--fail-on`: one word set, with one meaning, for `harness compare` and `harness regressions`.

A result is judged slower, faster, same or unstable: compare's verdict on a time or gap, or a
regression finding (an alert is slower or faster; an unstable newest point is unstable).

- never: the exit status never reports a change;
- gap-slower: a candidate's gap got slower (for runs on different machines: absolute times of two
  rented hosts differ, a gap measured on one machine does not);
- slower: a time or a gap got slower;
- changed: a time or a gap changed significantly, slower or faster;
- unstable: slower, or a result was unstable.
`any` (regressions' word before 0.1.0) is still accepted as `changed`, with a note on stderr.

`harness pr` also takes counter words, after the time word or alone, comma-separated
(`--fail-on slower,spills,registers:8,instructions:5%`): `spills` trips when head spills more
bytes per thread than base, `registers` when it uses more registers per thread, `instructions`
when its static instruction count grows; each by more than its threshold (`:N`, or `:N%` of
base; 0 by default). Static counters carry no noise, so these gate exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

__all__ = [
    "ALIASES",
    "COUNTER_WORDS",
    "HELP",
    "WORDS",
    "CounterRule",
    "FailOn",
    "counter_option",
    "option",
    "parse",
    "trips",
]

WORDS = ("never", "gap-slower", "slower", "changed", "unstable")
ALIASES = {"any": "changed"}
HELP = (
    "Exit 1 when: a gap got slower (gap-slower: for runs on different machines); a time or gap "
    "got slower (slower); one changed either way (changed); slower or unstable (unstable); "
    "never. The same words as the other command's --fail-on; `any` is the old word for changed."
)


def _resolve(ctx, param, value: str) -> str:
    if value in ALIASES:
        click.echo(
            f"note: --fail-on {value} is deprecated; it means --fail-on {ALIASES[value]}", err=True
        )
        return ALIASES[value]
    return value


def option(default: str):
    """The click option, accepting the old alias words too."""
    return click.option(
        "--fail-on",
        type=click.Choice([*WORDS, *ALIASES]),
        default=default,
        show_default=True,
        callback=_resolve,
        help=HELP,
    )


def trips(word: str, metric: str, verdict: str) -> bool:
    """Whether a `verdict` (slower, faster, same, unstable) on `metric` (gap, time) trips `word`."""
    if word not in WORDS:
        raise ValueError(f"fail_on must be one of {', '.join(WORDS)} (got {word!r})")
    if word == "gap-slower":
        return metric == "gap" and verdict == "slower"
    return (
        verdict
        in {
            "never": (),
            "slower": ("slower",),
            "changed": ("slower", "faster"),
            "unstable": ("slower", "unstable"),
        }[word]
    )


# counter word -> the static counters whose summed growth it watches
COUNTER_WORDS = {
    "spills": ("static/spill_store_bytes", "static/spill_load_bytes"),
    "registers": ("static/registers",),
    "instructions": ("static/instructions/total",),
}


@dataclass(frozen=True)
class CounterRule:
    """A counter word: trips when head's counters exceed base's by more than `threshold`
    (a fraction of base's when `relative`)."""

    word: str
    threshold: float = 0.0
    relative: bool = False

    def trips(self, before: dict[str, float | None], after: dict[str, float | None]) -> bool:
        names = COUNTER_WORDS[self.word]
        if any(before.get(n) is None or after.get(n) is None for n in names):
            return False  # a side without a static analysis gates nothing
        b = sum(before[n] for n in names)
        a = sum(after[n] for n in names)
        limit = self.threshold * b if self.relative else self.threshold
        return a - b > limit

    def __str__(self) -> str:
        if not self.threshold:
            return self.word
        shown = f"{self.threshold * 100:g}%" if self.relative else f"{self.threshold:g}"
        return f"{self.word}:{shown}"


@dataclass(frozen=True)
class FailOn:
    """A --fail-on of `harness pr`: one time word and any counter words."""

    word: str = "never"
    counters: tuple[CounterRule, ...] = ()

    def __str__(self) -> str:
        words = [self.word] if self.word != "never" or not self.counters else []
        return ",".join([*words, *map(str, self.counters)])


def _rule(part: str) -> CounterRule:
    word, _, limit = part.partition(":")
    if word not in COUNTER_WORDS:
        raise ValueError(
            f"--fail-on: unknown word {part!r} (time words: {', '.join(WORDS)}; counter words: "
            f"{', '.join(COUNTER_WORDS)}, each with an optional :N or :N%)"
        )
    if not limit:
        return CounterRule(word)
    relative = limit.endswith("%")
    try:
        threshold = float(limit[:-1] if relative else limit)
    except ValueError:
        threshold = -1.0
    if not threshold >= 0:
        raise ValueError(
            f"--fail-on {part}: the threshold must be a number >= 0, or N% (got {limit!r})"
        )
    return CounterRule(word, threshold / 100 if relative else threshold, relative)


def parse(text: str) -> FailOn:
    """'slower,spills,registers:8' -> FailOn; ValueError naming the bad word."""
    word, rules = "never", []
    for part in (p.strip() for p in text.split(",")):
        part = ALIASES.get(part, part)
        if part in WORDS:
            word = part
        else:
            rules.append(_rule(part))
    return FailOn(word, tuple(rules))


class _FailOnType(click.ParamType):
    name = "WORD[,COUNTER[:N|N%]...]"

    def convert(self, value, param, ctx):
        if isinstance(value, FailOn):
            return value
        try:
            return parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def counter_option(default: str):
    """--fail-on with the time words and the counter words (`harness pr`)."""
    return click.option(
        "--fail-on",
        type=_FailOnType(),
        default=default,
        show_default=True,
        help=HELP + " Counter words, comma-separated after it or alone: spills, registers, "
        "instructions, each with an optional threshold :N or :N% (head over base).",
    )
