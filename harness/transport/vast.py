"""`--target vast:<GPU model>`: rent one Vast.ai machine of that exact model, run, destroy it.

    with VastTransport("H200", identity=key) as target:  # rents; every run shares the rental
        target.run(...)
                                                       # destroyed here, on success or failure

At start, instances carrying the project's label that are older than any job could be (orphans
of a run that died before it could destroy them) are destroyed. The offer must be the exact GPU
model asked for (after folding case, spaces and underscores); another model is an error, never a
fallback, because the gap depends on the GPU. The SDK (`pip install 'kernelgap[vast]'`) is used
only through `VastSdk`, a thin adapter over the five `vastai.VastAI` methods this needs, so tests
drive the provider with a fake of that adapter.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

from harness.transport.base import Completed, ConnectError, StderrSink, TransportError
from harness.transport.ssh import SshTarget, SshTransport

LABEL = "kernelgap"
DEFAULT_IMAGE = "pytorch/pytorch:2.7.0-cuda12.8-cudnn9-devel"  # python3, numpy and nvcc
DEFAULT_DISK_GB = 32.0
SSH_WAIT_S = 900.0
POLL_S = 10.0
DESTROY_ATTEMPTS = 5
DESTROY_BACKOFF_S = 5.0
ORPHAN_AFTER_S = 6 * 3600.0


class VastError(TransportError):
    """Renting, reaching or destroying a Vast.ai machine failed; the message says what to do."""


class VastApi(Protocol):
    """The few Vast.ai calls the provider makes (real: `VastSdk`; tests: a recording fake)."""

    def search_offers(self, query: dict) -> list[dict]: ...

    def create_instance(self, offer_id: int, *, image: str, disk_gb: float, label: str) -> int: ...

    def attach_ssh_key(self, instance_id: int, public_key: str) -> None: ...

    def show_instances(self) -> list[dict]: ...

    def show_instance(self, instance_id: int) -> dict | None: ...

    def destroy_instance(self, instance_id: int) -> None: ...


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
        self.sdk.destroy_instance(instance_id)


def normalise_gpu_name(name: str) -> str:
    """'RTX_4090', 'rtx  4090' and 'RTX 4090' are one model; 'H100 SXM' and 'H100 PCIe' are not."""
    return " ".join(str(name).replace("_", " ").split()).casefold()


def choose_offer(offers: list[dict], gpu_model: str) -> dict:
    """The cheapest offer whose `gpu_name` is exactly `gpu_model`, else an error naming the found."""
    wanted = normalise_gpu_name(gpu_model)
    exact = [o for o in offers if normalise_gpu_name(o.get("gpu_name", "")) == wanted]
    if exact:
        return min(exact, key=lambda o: float(o.get("dph_total") or float("inf")))
    if not offers:
        raise VastError(f"vast: no rentable offer for GPU model {gpu_model!r} right now")
    others = sorted({str(o.get("gpu_name")) for o in offers})
    raise VastError(
        f"vast: no offer for GPU model {gpu_model!r}; the search found only "
        f"{', '.join(repr(n) for n in others)}; refusing to fall back to another model "
        "(the gap depends on the GPU): ask for one of those exactly, or try again later"
    )


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
        label: str = LABEL,
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
        self.label = label
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
        offers = self.api.search_offers({"gpu_name": {"eq": self.gpu_model}, "num_gpus": {"eq": 1}})
        offer = choose_offer(offers, self.gpu_model)
        self.say(
            f"vast: renting offer {offer.get('id')} ({offer.get('gpu_name')}, "
            f"${float(offer.get('dph_total') or 0):.2f}/h), image {self.image}"
        )
        self.instance_id = self.api.create_instance(
            int(offer["id"]), image=self.image, disk_gb=self.disk_gb, label=self.label
        )
        self.description = f"vast:{self.gpu_model} (instance {self.instance_id})"
        try:
            self._attach_key()
            host, port = self.wait_for_ssh()
            self.ssh = self.connect(host, port)
        except BaseException:
            self._destroy_rental()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.ssh is not None:
                self.ssh.__exit__(None, None, None)
                self.ssh = None
        finally:
            self._destroy_rental()

    def _attach_key(self) -> None:
        public = Path(f"{self.identity}.pub") if self.identity else None
        if public is not None and public.is_file():
            self.api.attach_ssh_key(self.instance_id, public.read_text().strip())

    def wait_for_ssh(self) -> tuple[str, int]:
        """Poll the instance until it runs with an SSH port, up to `ssh_wait_s`."""
        deadline = self.monotonic() + self.ssh_wait_s
        last: dict = {}
        while True:
            last = self.api.show_instance(self.instance_id) or {}
            endpoint = ssh_endpoint(last)
            if endpoint is not None:
                return endpoint
            if self.monotonic() >= deadline:
                raise VastError(
                    f"{self.description}: no SSH endpoint after {self.ssh_wait_s:g} s "
                    f"(status {last.get('actual_status')!r}: "
                    f"{last.get('status_msg') or 'no message'})"
                )
            self.sleep(self.poll_s)

    def connect(self, host: str, port: int) -> SshTransport:
        """Open the SSH session, retrying while the fresh machine's sshd comes up."""
        self._workdir = Path(tempfile.mkdtemp(prefix="kg-vast-"))
        known_hosts = self._workdir / "known_hosts"
        deadline = self.monotonic() + self.ssh_wait_s
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
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        if self.instance_id is not None:
            instance_id, self.instance_id = self.instance_id, None
            self.destroy(instance_id)

    def cleanup_orphans(self) -> list[int]:
        """Destroy instances labelled `label` older than `orphan_after_s` (left by a dead run)."""
        destroyed = []
        for instance in self.api.show_instances():
            if instance.get("label") != self.label:
                continue
            started = instance.get("start_date")
            if started is None:
                self.say(f"vast: instance {instance.get('id')} has no start date; left alone")
                continue
            age_s = self.now() - float(started)
            if age_s > self.orphan_after_s:
                self.say(
                    f"vast: destroying orphaned instance {instance['id']} "
                    f"(label {self.label!r}, {age_s / 3600:.1f} h old)"
                )
                self.destroy(int(instance["id"]))
                destroyed.append(int(instance["id"]))
        return destroyed
