"""`--target vast:<GPU model>`: rent one Vast.ai machine of that exact model, run, destroy it.

    with VastTransport("H200", identity=key) as target:  # rents; every run shares the rental
        target.run(...)
                                                       # destroyed here, on success or failure

Each rental carries a label of its own, `kernelgap-<12 hex digits>-exp<unix seconds>`, naming
the time by which its run must have ended (start + every step's limit + a grace period). At start,
labelled instances past that time (orphans of a run that died before it could destroy them) are
destroyed; a label with the prefix but no readable expiry falls back to an age rule. A failed
create is followed by a look-up of that label, so a rental made by a request that then failed is
destroyed too. Which offer is rented: the exact GPU model
(after folding case, spaces and underscores, and without the "NVIDIA" that CUDA's device names
carry and Vast's do not: `vast:"NVIDIA H200"` is Vast's "H200"; another model is an error, never a
fallback, because the gap depends on the GPU), the cheapest, and with `harness run --max-price`
none above the ceiling or without a stated price (when none is left the error names the model,
the ceiling and the cheapest price seen, and nothing is rented).

The SDK (`pip install 'kernelgap[vast]'`, imported only when a rental starts) is used only
through `VastSdk`, a thin adapter making the five `vastai.VastAI` calls of `VastApi` (a destroy
returns only once Vast confirms the instance gone), so tests drive the provider with a recording
fake of `VastApi`: no network."""

from __future__ import annotations

import math
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

from harness.errors import ConnectError, VastError
from harness.running.transport.base import Completed, StderrSink
from harness.running.transport.ssh import SshTarget, SshTransport

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


LABEL = "kernelgap"  # the prefix of every rental's label


DEFAULT_IMAGE = "pytorch/pytorch:2.7.0-cuda12.8-cudnn9-devel"  # python3, numpy and nvcc


DEFAULT_DISK_GB = 32.0


SSH_WAIT_S = 900.0


POLL_S = 10.0


WAIT_REPORT_S = 60.0  # while waiting for the machine or its sshd, say so this often


DESTROY_ATTEMPTS = 5


DESTROY_BACKOFF_S = 5.0


ORPHAN_AFTER_S = 6 * 3600.0  # age rule for a labelled instance without a readable expiry


LIFETIME_S = 6 * 3600.0  # how long a rental may live when the caller does not say


def rental_label(prefix: str, expiry_s: float) -> str:
    """`<prefix>-<12 hex digits>-exp<unix seconds>`: unique to one rental, with its expiry."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}-exp{int(expiry_s)}"


def label_expiry(label: object, prefix: str) -> float | None:
    """The expiry (unix seconds) in a label made by `rental_label`, else None."""
    found = re.fullmatch(rf"{re.escape(prefix)}-[0-9a-f]{{12}}-exp([0-9]+)", str(label))
    return float(found.group(1)) if found else None


def ssh_endpoint(instance: dict) -> tuple[str, int] | None:
    """(host, port) of a running instance's sshd: a direct port when mapped, else Vast's proxy."""
    if instance.get("actual_status") != "running":
        return None
    mapped = (instance.get("ports") or {}).get("22/tcp")
    if mapped and instance.get("public_ipaddr"):
        return str(instance["public_ipaddr"]).strip(), int(mapped[0]["HostPort"])
    if instance.get("ssh_host") and instance.get("ssh_port"):
        return str(instance["ssh_host"]), int(instance["ssh_port"])
    return None


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class VastTransport:
    """One rented machine of exactly `gpu_model`, reached over SSH as root; always destroyed.

    The machine is new, so its host key cannot be known beforehand: the first SSH connection
    records it in a fresh known_hosts file (printed on stderr) and every later connection of this
    rental is held to it; nothing else is ever trusted blindly.
    """

    def __init__(
        self,
        gpu_model: str,
        *,
        api: VastApi | None = None,
        identity: Path | None = None,
        python: str = "python3",
        connect_timeout_s: float = 15.0,
        image: str = DEFAULT_IMAGE,
        disk_gb: float = DEFAULT_DISK_GB,
        label_prefix: str = LABEL,
        lifetime_s: float = LIFETIME_S,
        max_price: float | None = None,
        ssh_wait_s: float = SSH_WAIT_S,
        poll_s: float = POLL_S,
        destroy_attempts: int = DESTROY_ATTEMPTS,
        destroy_backoff_s: float = DESTROY_BACKOFF_S,
        orphan_after_s: float = ORPHAN_AFTER_S,
        ssh_factory: Callable[..., SshTransport] = SshTransport,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] = _stderr,
    ):
        if not normalise_gpu_name(gpu_model):
            raise VastError("--target vast:<GPU model>: give the model, e.g. vast:H200")
        self.gpu_model = gpu_model
        self.api = api
        self.identity = identity
        self.python = python
        self.connect_timeout_s = connect_timeout_s
        self.image = image
        self.disk_gb = disk_gb
        self.label_prefix = label_prefix
        self.lifetime_s = lifetime_s
        self.max_price = max_price  # USD per hour; offers above it are never rented
        self.label: str | None = None  # this rental's, set when renting
        self.ssh_wait_s = ssh_wait_s
        self.poll_s = poll_s
        self.destroy_attempts = destroy_attempts
        self.destroy_backoff_s = destroy_backoff_s
        self.orphan_after_s = orphan_after_s
        self.ssh_factory = ssh_factory
        self.monotonic = monotonic
        self.now = now
        self.sleep = sleep
        self.say = say
        self.description = f"vast:{gpu_model}"
        self.instance_id: int | None = None
        self.ssh: SshTransport | None = None
        self._workdir: Path | None = None

    # -- the rental ---------------------------------------------------------------------------

    def __enter__(self) -> VastTransport:
        if self.api is None:
            self.api = VastSdk()
        self.cleanup_orphans()
        offers = self.api.search_offers(offer_query(self.gpu_model))
        offer = choose_offer(offers, self.gpu_model, self.max_price)
        self.label = rental_label(self.label_prefix, self.now() + self.lifetime_s)
        self.say(
            f"vast: renting offer {offer.get('id')} ({offer.get('gpu_name')}, "
            f"${float(offer.get('dph_total') or 0):.2f}/h"
            + (f", ceiling ${self.max_price:.2f}/h" if self.max_price is not None else "")
            + f"), image {self.image}, "
            f"label {self.label}"
        )
        try:
            self.instance_id = self.api.create_instance(
                int(offer["id"]), image=self.image, disk_gb=self.disk_gb, label=self.label
            )
        except BaseException as exc:
            self._destroy_labelled(self.label, exc)  # the request may have rented, then failed
            raise
        self.description = f"vast:{self.gpu_model} (instance {self.instance_id})"
        try:
            self._attach_key()
            host, port = self.wait_for_ssh()
            self.ssh = self.connect(host, port)
        except BaseException:
            try:
                self._destroy_rental()
            finally:
                self._remove_workdir()
            raise
        return self

    def __exit__(self, *exc) -> None:
        # destroy first: it stops the billing, and closing a dead connection can take a while
        try:
            self._destroy_rental()
        finally:
            try:
                if self.ssh is not None:
                    self.ssh.__exit__(None, None, None)
                    self.ssh = None
            finally:
                self._remove_workdir()

    def _attach_key(self) -> None:
        public = Path(f"{self.identity}.pub") if self.identity else None
        if public is not None and public.is_file():
            self.api.attach_ssh_key(self.instance_id, public.read_text().strip())

    def _waiting(self, started: float, said: float, what: str) -> float:
        """Every WAIT_REPORT_S, say what the wait is for and how long it has lasted."""
        now = self.monotonic()
        if now - said < WAIT_REPORT_S:
            return said
        self.say(f"vast: waiting {now - started:.0f} s (of up to {self.ssh_wait_s:g} s) for {what}")
        return now

    def wait_for_ssh(self) -> tuple[str, int]:
        """Poll the instance until it runs with an SSH port, up to `ssh_wait_s`."""
        started = said = self.monotonic()
        deadline = started + self.ssh_wait_s
        self.say(
            f"vast: waiting for instance {self.instance_id} to start (the image is pulled first)"
        )
        last: dict = {}
        while True:
            last = self.api.show_instance(self.instance_id) or {}
            endpoint = ssh_endpoint(last)
            if endpoint is not None:
                return endpoint
            status = (
                f"status {last.get('actual_status')!r}: {last.get('status_msg') or 'no message'}"
            )
            if self.monotonic() >= deadline:
                raise VastError(
                    f"{self.description}: no SSH endpoint after {self.ssh_wait_s:g} s ({status})"
                )
            what = f"instance {self.instance_id} to run with an SSH port ({status})"
            said = self._waiting(started, said, what)
            self.sleep(self.poll_s)

    def connect(self, host: str, port: int) -> SshTransport:
        """Open the SSH session, retrying while the fresh machine's sshd comes up."""
        self._workdir = Path(tempfile.mkdtemp(prefix="kg-vast-"))
        known_hosts = self._workdir / "known_hosts"
        started = said = self.monotonic()
        deadline = started + self.ssh_wait_s
        while True:
            known_hosts.write_text("")  # a fresh file per attempt: trust only this machine's key
            ssh = self.ssh_factory(
                SshTarget(host=host, user="root", port=port),
                identity=self.identity,
                known_hosts=known_hosts,
                connect_timeout_s=self.connect_timeout_s,
                python=self.python,
                accept_new_host_key=True,
            )
            try:
                ssh.__enter__()
            except ConnectError as exc:
                if self.monotonic() >= deadline:
                    raise VastError(f"{self.description}: SSH never came up: {exc}") from None
                said = self._waiting(started, said, f"sshd at {host}:{port} ({exc})")
                self.sleep(self.poll_s)
                continue
            self.say(f"vast: {host}:{port} host key (first use): {known_hosts.read_text().strip()}")
            return ssh

    def run(
        self,
        command: list[str],
        stdin: bytes | BinaryIO | None,
        *,
        timeout_s: float,
        stderr_sink: StderrSink,
    ) -> Completed:
        if self.ssh is None:
            raise VastError(f"{self.description}: not rented (use `with`)")
        return self.ssh.run(command, stdin, timeout_s=timeout_s, stderr_sink=stderr_sink)

    # -- destroying ---------------------------------------------------------------------------

    def destroy(self, instance_id: int) -> None:
        """Destroy with retries (backoff doubles); a machine that cannot be destroyed is loud."""
        delay_s = self.destroy_backoff_s
        for attempt in range(1, self.destroy_attempts + 1):
            try:
                self.api.destroy_instance(instance_id)
                self.say(f"vast: destroyed instance {instance_id}")
                return
            except Exception as exc:
                if attempt == self.destroy_attempts:
                    raise VastError(
                        f"vast: could not destroy instance {instance_id} after {attempt} "
                        f"attempts ({exc}); it is still billing: destroy it now with "
                        f"`vastai destroy instance {instance_id}` or at "
                        "https://cloud.vast.ai/instances/"
                    ) from exc
                self.say(f"vast: destroying instance {instance_id} failed ({exc}); retrying")
                self.sleep(delay_s)
                delay_s *= 2

    def _destroy_rental(self) -> None:
        if self.instance_id is not None:
            instance_id, self.instance_id = self.instance_id, None
            self.destroy(instance_id)

    def _remove_workdir(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def _destroy_labelled(self, label: str, cause: BaseException) -> None:
        """After a failed create: destroy whatever rental carries `label` (normally none)."""
        try:
            found = [int(i["id"]) for i in self.api.show_instances() if i.get("label") == label]
        except Exception as exc:
            raise VastError(
                f"vast: renting failed ({cause}) and the instances could not be listed to check "
                f"that none was made ({exc}); look for label {label!r} at "
                "https://cloud.vast.ai/instances/ and destroy it if present"
            ) from cause
        for instance_id in found:
            self.say(f"vast: renting failed ({cause}) but made instance {instance_id}; destroying")
            self.destroy(instance_id)

    def cleanup_orphans(self) -> list[int]:
        """Destroy rentals whose label's expiry has passed (left by a run that died).

        A label that is the prefix alone, or the prefix and a dash but no readable expiry (an
        older harness's), counts as orphaned once older than `orphan_after_s`.
        """
        destroyed = []
        prefix = self.label_prefix
        for instance in self.api.show_instances():
            label = instance.get("label")
            if not isinstance(label, str) or not (
                label == prefix or label.startswith(prefix + "-")
            ):
                continue
            expiry_s = label_expiry(label, prefix)
            if expiry_s is not None:
                if self.now() <= expiry_s:
                    continue
                why = f"label {label!r}, expired {(self.now() - expiry_s) / 3600:.1f} h ago"
            else:
                started = instance.get("start_date")
                if started is None:
                    self.say(f"vast: instance {instance.get('id')} has no start date; left alone")
                    continue
                age_s = self.now() - float(started)
                if age_s <= self.orphan_after_s:
                    continue
                why = f"label {label!r}, {age_s / 3600:.1f} h old"
            self.say(f"vast: destroying orphaned instance {instance['id']} ({why})")
            self.destroy(int(instance["id"]))
            destroyed.append(int(instance["id"]))
        return destroyed
