"""The Vast.ai calls `--target vast:` makes (harness.running.transport.vast), behind one small interface.

`VastApi` is the five calls the provider needs; `VastSdk` makes them with the `vastai` package
(`pip install 'kernelgap[vast]'`, imported only when a rental starts), and a destroy returns only
once Vast confirms the instance gone. Tests drive the provider with a recording fake of
`VastApi` instead: no network.
"""

from __future__ import annotations

from typing import Protocol

from harness.running.transport.vast_offers import VastError

__all__ = ["GONE_STATUSES", "VastApi", "VastSdk"]

GONE_STATUSES = {"destroyed", "destroying", "terminated", "offline"}  # as vastai's own CLI reads


class VastApi(Protocol):
    """The few Vast.ai calls the provider makes (real: `VastSdk`; tests: a recording fake)."""

    def search_offers(self, query: dict) -> list[dict]: ...

    def create_instance(self, offer_id: int, *, image: str, disk_gb: float, label: str) -> int: ...

    def attach_ssh_key(self, instance_id: int, public_key: str) -> None: ...

    def show_instances(self) -> list[dict]: ...

    def show_instance(self, instance_id: int) -> dict | None: ...

    def destroy_instance(self, instance_id: int) -> None:
        """Returns only once the instance is confirmed gone or marked destroyed; else raises."""


class VastSdk:
    """`VastApi` over `vastai.VastAI` (API key from VAST_API_KEY or the vastai config file)."""

    def __init__(self, api_key: str | None = None):
        try:
            from vastai import VastAI
        except ImportError:
            raise VastError(
                "--target vast: needs the `vastai` package: pip install 'kernelgap[vast]'"
            ) from None
        self.sdk = VastAI(api_key=api_key, raw=True, quiet=True)

    def search_offers(self, query: dict) -> list[dict]:
        return list(self.sdk.search_offers(query=query, order="dph_total", limit=64))

    def create_instance(self, offer_id: int, *, image: str, disk_gb: float, label: str) -> int:
        answer = self.sdk.create_instance(
            id=offer_id, image=image, disk=disk_gb, label=label, ssh=True, direct=True
        )
        if not answer.get("success") or "new_contract" not in answer:
            raise VastError(f"vast: renting offer {offer_id} failed: {answer}")
        return int(answer["new_contract"])

    def attach_ssh_key(self, instance_id: int, public_key: str) -> None:
        self.sdk.attach_ssh(instance_id, public_key)

    def show_instances(self) -> list[dict]:
        return list(self.sdk.show_instances())

    def show_instance(self, instance_id: int) -> dict | None:
        return self.sdk.show_instance(instance_id)

    def destroy_instance(self, instance_id: int) -> None:
        answer = self.sdk.destroy_instance(instance_id)
        if not isinstance(answer, dict) or not answer.get("success"):
            raise VastError(f"vast: destroying instance {instance_id} was refused: {answer}")
        try:
            left = self.sdk.show_instance(instance_id)
        except Exception as exc:  # the SDK raises requests' HTTPError; 404 means gone
            if getattr(getattr(exc, "response", None), "status_code", None) == 404:
                return
            raise
        status = (left or {}).get("intended_status") or (left or {}).get("actual_status")
        if left and status not in GONE_STATUSES:
            raise VastError(
                f"vast: instance {instance_id} is still {status!r} after a destroy that "
                "reported success"
            )
