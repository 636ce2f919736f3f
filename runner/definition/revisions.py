"""Two (or more) revisions of a compiler timed in one run: `bench --bundle base=DIR --bundle head=DIR`.

Each labelled bundle is the output of `runner build` at one revision of the compiler under test.
Every candidate implementation X that a labelled bundle holds becomes one implementation per
label, `X@base` and `X@head`, with "variant_of": "X" and "revision": the label; all of them and
the baseline are loaded into the one context of the case and timed in the same interleaved,
paired rounds. So each variant gets its gap against the baseline as any candidate does, and the
case gets a `pairs` block (runner.document.pair_blocks): each later revision against the first
(head against base) as the ratio of medians with the same paired bootstrap interval as a gap
(runner.measurement.stats.gap, with the first revision in the baseline's place). The baseline comes from the first labelled bundle that
holds it, else it is built here; a candidate no labelled bundle holds is built here under its
own name.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.definition.bundle import Bundle, BundleError
from runner.definition.manifest import CaseSpec, ImplSpec

__all__ = ["LABEL", "SEPARATOR", "parse_bundle_options", "variants"]

LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
SEPARATOR = "@"  # never in an implementation name (cases.schema.json: [A-Za-z0-9_.+-]+)


def parse_bundle_options(
    values: tuple[str, ...],
) -> tuple[Path | None, tuple[tuple[str, Path], ...]]:
    """`--bundle` values: one plain DIR, or LABEL=DIR pairs (two or more, labels unique).

    Returns (plain bundle or None, ((label, dir), ...)); BundleError for a mix, a repeated or a
    malformed label, or a single labelled bundle (there is nothing to pair it with).
    """
    plain = [v for v in values if "=" not in v]
    labelled = [tuple(v.split("=", 1)) for v in values if "=" in v]
    if (plain and labelled) or len(plain) > 1:
        raise BundleError(
            f"--bundle {' --bundle '.join(values)}: give one bundle folder, or two or more as "
            "LABEL=DIR (base=bundle-base head=bundle-head), not both"
        )
    labels = [label for label, _ in labelled]
    for label in labels:
        if not LABEL.match(label):
            raise BundleError(
                f"--bundle {label}=...: a label is a letter then letters, digits, '_', '.' or '-'"
            )
    if len(set(labels)) != len(labels):
        raise BundleError(f"--bundle: label given twice ({', '.join(labels)})")
    if len(labelled) == 1:
        raise BundleError(
            f"--bundle {labels[0]}=...: a labelled bundle is one revision of a pair; give at "
            f"least two (base=DIR head=DIR), or a plain --bundle DIR"
        )
    return (Path(plain[0]) if plain else None), tuple((k, Path(v)) for k, v in labelled)


def variants(
    case: CaseSpec, impl: ImplSpec, revisions: dict[str, Bundle]
) -> list[tuple[str, str, str, dict]]:
    """(name, label, PTX, provenance) of each revision of `impl` that a labelled bundle holds.

    A candidate gives one entry per bundle holding it (`X@label`); the baseline gives at most
    one, under its own name, from the first bundle holding it. Empty: build it here as usual.
    BundleError when a bundle is stale for this case (bundle.Bundle.lookup).
    """
    out = []
    for label, bundle in revisions.items():
        found = bundle.lookup(case, impl)
        if found is None:
            continue
        ptx, provenance = found
        if impl.role == "baseline":
            return [(impl.name, label, ptx, provenance)]
        out.append((f"{impl.name}{SEPARATOR}{label}", label, ptx, provenance))
    return out
