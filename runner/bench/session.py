"""A session collects every comparison of one process into one result document and report.

The pytest plugin configures the current session from its options and writes the files at the
end; a script calls `bench.session.current().write(...)` itself. The GPU device is opened on
first use only, so collecting tests or verifying on the CPU needs no GPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from pathlib import Path

from protocol.codec import encode
from protocol.input_files import checkout_commit
from protocol.validation import validate
from runner.bench.options import TimingOptions
from runner.definition import bundle
from runner.document import document as run_document
from runner.document import sweep_block

__all__ = [
    "Session",
    "current",
    "group_rows",
    "reset",
]


class Session:
    def __init__(
        self,
        name: str = "python-api",
        options: TimingOptions | None = None,
        device=None,
        root: str | Path = ".",
    ):
        self.name = name
        self.options = options or TimingOptions()
        self._device = device
        self.root = Path(root)
        self.cases: list[dict] = []
        self.started = bundle.utc_now()
        self.warned: set[str] = set()

    def warn_once(self, text: str) -> None:
        """`kernelgap: <text>` on stderr, the first time this session sees it."""
        if text not in self.warned:
            self.warned.add(text)
            print(f"kernelgap: {text}", file=sys.stderr, flush=True)

    def configure(self, **changes) -> None:
        self.options = dataclasses.replace(self.options, **changes)

    def use_device(self, device) -> None:
        """Compare on `device` (anything with CudaDevice's methods; tests pass a CPU stand-in)."""
        if self._device is not None and self._device is not device:
            self._device.close()
        self._device = device

    def device(self):
        if self._device is None:
            try:
                import torch  # noqa: F401
            except ImportError as exc:
                raise RuntimeError(
                    "runner.bench's GPU device drives torch callables and needs torch 2.7+ "
                    "(pip install -e '.[ops]'); tests without a GPU pass a stand-in device with "
                    "bench.current().use_device(...)"
                ) from exc
            from runner.bench.cuda_device import CudaDevice

            self._device = CudaDevice()
        return self._device

    def record(self, case_doc: dict) -> None:
        """Keep a comparison's case. The first comparison of an op on a case keeps the plain id;
        a later one in this session gets a suffix naming its mode and other implementations,
        e.g. `.../bmm#hot:same,twice`, and `#2`, `#3`... when that is taken too."""
        taken = {c["id"] for c in self.cases}
        if case_doc["id"] in taken:
            others = sorted(n for n in case_doc["implementations"] if n != case_doc["baseline"])
            case_doc["id"] += f"#{case_doc['settings']['mode']}:{','.join(others) or '-'}"
        base, n = case_doc["id"], 1
        while case_doc["id"] in taken:
            n += 1
            case_doc["id"] = f"{base}#{n}"
        self.cases.append(case_doc)

    def content_sha256(self) -> str:
        """What was compared: case ids and versions with each implementation's source hash."""
        content = sorted(
            (c["id"], c["version"], n, i["build"]["source_sha256"])
            for c in self.cases
            for n, i in c["implementations"].items()
        )
        return hashlib.sha256(encode(content)).hexdigest()

    def document(self) -> dict:
        """The result document of everything recorded so far (validated against the schema)."""
        env = self.device().environment() if self._device is not None or self.cases else {}
        suite = {
            "name": self.name,
            "version": 1,
            "path": str(self.root),
            "sha256": self.content_sha256(),
            "gpu": None,
            **checkout_commit(self.root),
        }
        options = {**dataclasses.asdict(self.options), "frontend": "python"}
        cases = group_rows(self.cases)  # a swept workload's rows: points of one case
        doc = run_document(suite, env, options, cases, self.started, bundle.utc_now())
        validate(doc, "result", "result document (runner.bench)")
        return doc

    def write(self, output: str | Path | None = None, report: str | Path | None = None) -> dict:
        from runner.bench.report import markdown
        from runner.document import write_atomic

        doc = self.document()
        if output:
            write_atomic(Path(output), encode(doc, pretty=True))
        if report:
            write_atomic(Path(report), markdown(doc).encode())
        return doc

    def close(self) -> None:
        if self._device is not None:
            self._device.close()
            self._device = None


_CURRENT: Session | None = None


def current() -> Session:
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Session()
    return _CURRENT


def reset(session: Session | None = None) -> Session:
    """Make `session` (or a fresh one) the current session and return it."""
    global _CURRENT
    if _CURRENT is not None and _CURRENT is not session:
        _CURRENT.close()
    _CURRENT = session or Session()
    return _CURRENT


# A swept workload's rows as the points of one case, as runner bench writes a suite's swept
# case: the headline row's comparison is the case block, every other row one of its points;
# rows of workloads without sweep = True stay cases of their own.


def group_rows(cases: list[dict]) -> list[dict]:
    """`cases` (a session's case documents) with each swept workload's rows folded into one
    case block per op and dtype, in the place of its first row."""
    groups: dict[str, list[dict]] = {}
    out: list[dict | str] = []
    for doc in cases:
        sweep = doc.get("sweep")
        if sweep is None:
            out.append(doc)
            continue
        if sweep["case"] not in groups:
            groups[sweep["case"]] = []
            out.append(sweep["case"])
        groups[sweep["case"]].append(doc)
    return [item if isinstance(item, dict) else _block(item, groups[item]) for item in out]


def _block(case_id: str, docs: list[dict]) -> dict:
    docs = sorted(docs, key=lambda d: d["sweep"]["order"])
    headline = docs[0]["sweep"]["headline"]
    points = [(d["sweep"]["point"], d["dims"], _bare(d)) for d in docs]
    lead = next((d for pid, _, d in points if pid == headline), None)
    if lead is None:  # the headline row was not compared: the last row leads, marked
        headline, lead = points[-1][0], points[-1][2]
    head = {**lead, "id": case_id, "description": f"{lead['op']} on {lead['workload']}, by row"}
    return sweep_block(headline, head, ["row"], [(p, dims, d) for p, dims, d in points])


def _bare(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "sweep"}
