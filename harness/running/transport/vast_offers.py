"""Which Vast.ai offer to rent: the exact GPU model asked for, the cheapest, under a price ceiling.

The offer must be the exact GPU model (after folding case, spaces and underscores, and without
the "NVIDIA" that CUDA's device names carry and Vast's model names do not: `vast:"NVIDIA H200"`,
as a suite pins it, is Vast's "H200"); another model is an error, never a fallback, because the
gap depends on the GPU. With a ceiling
(`harness run --max-price`), offers above it, and offers that state no price, are refused: when
none is left the error names the model, the ceiling and the cheapest price seen, and nothing is
rented. VastError, the provider's one error, lives here so that harness.running.transport.vast and this
module share it without importing each other.
"""

from __future__ import annotations

import math

from harness.errors import VastError

__all__ = ["VastError", "choose_offer", "normalise_gpu_name", "offer_price", "offer_query"]

VENDOR = "nvidia"  # the first word of CUDA's device names, never of Vast's model names


def _vast_name(name: str) -> str:
    """'NVIDIA  H200' -> 'H200', 'RTX_4090' -> 'RTX 4090': a model as Vast spells it."""
    words = str(name).replace("_", " ").split()
    if len(words) > 1 and words[0].casefold() == VENDOR:
        words = words[1:]
    return " ".join(words)


def normalise_gpu_name(name: str) -> str:
    """'RTX_4090', 'rtx  4090' and 'RTX 4090' are one model, as are 'NVIDIA H200' and 'H200';
    'H100 SXM' and 'H100 PCIe' are not, nor 'H200' and 'H200 NVL'."""
    return _vast_name(name).casefold()


def offer_query(gpu_model: str) -> dict:
    """The search for one-GPU offers of `gpu_model`, named as Vast names models ('RTX 4090')."""
    return {"gpu_name": {"eq": _vast_name(gpu_model)}, "num_gpus": {"eq": 1}}


def offer_price(offer: dict) -> float | None:
    """The offer's total price in USD per hour (`dph_total`), None when it states none."""
    try:
        price = float(offer.get("dph_total"))
    except (TypeError, ValueError):
        return None
    return price if price >= 0 else None


def choose_offer(offers: list[dict], gpu_model: str, max_price: float | None = None) -> dict:
    """The cheapest offer whose `gpu_name` is exactly `gpu_model` and, with `max_price` (USD per
    hour), whose price is at most that; else a VastError naming what was found."""
    wanted = normalise_gpu_name(gpu_model)
    exact = [o for o in offers if normalise_gpu_name(o.get("gpu_name", "")) == wanted]
    if not exact:
        if not offers:
            raise VastError(f"vast: no rentable offer for GPU model {gpu_model!r} right now")
        others = sorted({str(o.get("gpu_name")) for o in offers})
        raise VastError(
            f"vast: no offer for GPU model {gpu_model!r}; the search found only "
            f"{', '.join(repr(n) for n in others)}; refusing to fall back to another model "
            "(the gap depends on the GPU): ask for one of those exactly, or try again later"
        )
    if max_price is None:
        return min(exact, key=lambda o: math.inf if offer_price(o) is None else offer_price(o))
    priced = [(price, o) for o in exact if (price := offer_price(o)) is not None]
    affordable = [(price, o) for price, o in priced if price <= max_price]
    if affordable:
        return min(affordable, key=lambda pair: pair[0])[1]
    if priced:
        cheapest, offer = min(priced, key=lambda pair: pair[0])
        seen = (
            f"the cheapest of {len(exact)} seen costs ${cheapest:.2f}/h (offer {offer.get('id')})"
        )
    else:
        seen = f"none of the {len(exact)} seen states a price"
    raise VastError(
        f"vast: no offer for GPU model {gpu_model!r} at or under the ceiling "
        f"--max-price {max_price:.2f} USD/h: {seen}; nothing was rented. Raise the ceiling "
        "or try again later"
    )
