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
"""

from __future__ import annotations

import click

__all__ = ["ALIASES", "HELP", "WORDS", "option", "trips"]

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
