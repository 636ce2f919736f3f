"""A cluster run's documents: each case's kept as it arrives, then one document per GPU model.

Every task of `harness run --cluster` (harness.running.cluster) returns the runner's document of
one case. It is validated and saved at once under `<out>/<start>-cluster/` (a one-case result
document that `harness ingest` takes as it is), so nothing measured is lost if the harness dies.
At the end the cases are merged per GPU model into one document each, in the suite's order:
the run's environment records every worker of that model, each case its device (worker, host,
GPU UUID, driver), the summary is recomputed (protocol.validation.summary) and the document is
validated. A run over two models writes two documents: a history never mixes them.

A swept case dealt point by point (one task per point, `case[point]`) keeps each point's document
as it arrives too (`case[point].json`); at the end its points are put back into one case block
per model (protocol.points.merge_points, on the runner's skeleton of the case: the points in
declared order), each point with the device it ran on; a point that ran on another model is
recorded in this model's block as skipped, naming that model.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from harness.running.result_files import keep
from harness.running.session import result_name
from protocol.codec import decode, encode
from protocol.errors import DocumentError
from protocol.points import measured_at, merge_points, split_id
from protocol.validation import summary, validate
from protocol.version import RESULT_SCHEMA_VERSION, check_version

__all__ = ["CaseDocuments", "skeleton", "suite_block"]


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def skeleton(case: dict, status: str, phase: str, message: str) -> dict:
    """A case that produced no document of its own, from its manifest table: ids, sources and
    the reason (the runner's case_skeleton, from what the host can read without the runner)."""
    impls = [i for i in case.get("impl", []) if isinstance(i, dict)]
    baseline = next((i.get("name") for i in impls if i.get("role") == "baseline"), "baseline")
    dims = case.get("dims") if isinstance(case.get("dims"), dict) else {}
    return {
        "id": case["id"],
        "version": case.get("version") if isinstance(case.get("version"), int) else 1,
        "description": str(case.get("description", "")),
        "status": status,
        "error": {"phase": phase, "message": message},
        "baseline": str(baseline),
        "dims": {k: v for k, v in dims.items() if isinstance(v, int)},
        "implementations": {
            str(i.get("name")): {
                "role": i.get("role", "candidate"),
                "toolchain": str(i.get("toolchain", "")),
                "source": str(i.get("source", "")),
                "entry": str(i.get("entry", "")),
            }
            for i in impls
        },
    }


class CaseDocuments:
    """The case documents of one cluster run, kept as they arrive and merged per model."""

    def __init__(self, out: Path, suite: dict, fallback_suite: dict, options: dict, say):
        """`suite`: the manifest's TOML (its case tables); `fallback_suite`: the document's suite
        block for a model whose cases all failed before the runner wrote one."""
        self.out = Path(out)
        self.started = _utc_now()
        self.folder = self.out / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-cluster"
        self.tables = {c["id"]: c for c in suite.get("case", []) if isinstance(c, dict)}
        self.order = {case_id: index for index, case_id in enumerate(self.tables)}
        self.fallback_suite = fallback_suite
        self.options = options
        self.say = say
        self.cases: dict[str, tuple[dict, dict | None, object]] = {}  # id: (case, doc, worker)
        # a sweep dealt point by point: {case id: {point id: (its block, doc, worker)}}
        self.points: dict[str, dict[str, tuple[dict, dict | None, object]]] = {}
        self.skeletons: dict[str, dict] = {}  # id: the case as the runner records it not run
        self.problems: list[str] = []
        self.unrun: dict[str, tuple[str, str, str]] = {}  # id: (status, phase, message)

    def _save_case(self, case_id: str, data: bytes) -> None:
        kept = keep(self.folder, f"{case_id}.json", data, f"{case_id}'s document")
        if kept.problem:
            self.problems.append(kept.problem)

    def arrived(self, case_id: str, outcome: dict, worker, lost_on: list[str]) -> str:
        """Keep a task's outcome; what became of the case, for the progress line."""
        where = f"on {outcome.get('name')} ({outcome.get('host')})"
        if outcome.get("skipped"):
            budget = self.options.get("budget_s")
            self.failed(
                case_id, f"not run: the run's --budget-s {budget} was spent", worker, "skipped"
            )
            return "skipped (budget spent)"
        if outcome.get("returncode") not in (0, 1):
            lines = [line for line in outcome.get("stderr", "").splitlines() if line.strip()]
            last = lines[-1].removeprefix("error: ") if lines else "no output"
            how = "timed out" if outcome.get("timed_out") else f"exited {outcome.get('returncode')}"
            self.failed(case_id, f"the runner {how} {where}: {last}", worker)
            return f"failed: the runner {how} {where}"
        what = f"{case_id}'s document from {outcome.get('name')}"
        try:
            document = decode(outcome["stdout"], what)
            check_version(document["schema_version"], RESULT_SCHEMA_VERSION, what)
            validate(document, "result", what)
        except (ValueError, KeyError, TypeError) as exc:
            if outcome.get("stdout"):
                self._save_case(f"{case_id}.unreadable", outcome["stdout"])
            self.failed(case_id, f"the runner {where} wrote no valid document: {exc}", worker)
            return "failed: no valid document"
        self._save_case(case_id, outcome["stdout"])
        case_id, point = split_id(case_id)
        found = [c for c in document["cases"] if c["id"] == case_id] or document["cases"]
        case = found[0] if found else skeleton(self.tables[case_id], "failed", "unknown", "no case")
        case["device"] = self._device(case.get("device"), worker, outcome)
        if point is not None:
            case = measured_at(case, point) or skeleton(
                self.tables[case_id], "failed", "unknown", f"the runner's document lacks {point}"
            )
        if lost_on:
            case.setdefault("notes", []).append(
                f"run again on {outcome.get('name')}: its first worker ({', '.join(lost_on)}) "
                "was lost mid-case"
            )
        self._keep(case_id, point, (case, document, worker))
        return f"{case['status']} {where}"

    def _keep(self, case_id: str, point: str | None, entry: tuple) -> None:
        if point is None:
            self.cases[case_id] = entry
        else:
            self.points.setdefault(case_id, {})[point] = entry

    @staticmethod
    def _device(device: dict | None, worker, outcome: dict) -> dict:
        """The case's device with where it ran: the worker, its host, the GPU's UUID, driver
        and ordinal on that host."""
        block = dict(device or {})
        if worker is not None:
            block.update(
                name=worker.device.get("name"),
                uuid=worker.device.get("uuid"),
                driver_version=worker.device.get("driver_version"),
                host=worker.host,
                worker=worker.name,
            )
            if worker.ordinal.isdigit():
                block["index"] = int(worker.ordinal)
        block.setdefault("index", 0)
        block.setdefault("name", None)
        block.setdefault("host", outcome.get("host"))
        return block

    def failed(self, case_id: str, why: str, worker, status: str = "failed") -> None:
        """A case (or a point, `case[point]`) without a document of its own: failed (or
        skipped) with the reason."""
        phase = "setup" if status == "skipped" else "worker"
        message = f"case {case_id}: {why}"
        unit, (case_id, point) = case_id, split_id(case_id)
        if point is None:
            case = skeleton(self.tables[case_id], status, phase, message)
            self.unrun[case_id] = (status, phase, message)
        else:  # a point dealt alone has the runner's skeleton (the dealing came from it)
            case = measured_at(self.skeletons[case_id], point)
            case.update(status=status, error={"phase": phase, "message": message})
        if worker is not None:
            case["device"] = self._device(None, worker, {})
        self._keep(case_id, point, (case, None, worker))
        self._save_case(f"{unit}.{status}", encode({"case": case}, pretty=True))

    def ok(self) -> bool:
        """Whether every case and every point dealt ended ok; a sweep whose headline was not
        selected is a skipped case, as the runner records (and exits on) it."""
        cases = [case for case, _, _ in self.cases.values()]
        for case_id, points in self.points.items():
            if self.skeletons[case_id]["point"] not in points:
                return False
            cases += [block for block, _, _ in points.values()]
        return all(case["status"] == "ok" for case in cases)

    def use_skeletons(self, skeletons: dict[str, dict]) -> None:
        """Each case that has no document of its own as the runner records a case that did not
        run (its launch geometry and check dims, which the host cannot evaluate), with its
        status and reason."""
        self.skeletons = skeletons
        for case_id, (status, phase, message) in self.unrun.items():
            if case_id in skeletons:
                old, _, worker = self.cases[case_id]
                case = {k: v for k, v in skeletons[case_id].items() if k not in ("error", "notes")}
                case.update(status=status, error={"phase": phase, "message": message})
                if "device" in old:
                    case["device"] = old["device"]
                self.cases[case_id] = (case, None, worker)

    def _model_of(self, worker, models: list[str]) -> str:
        return worker.model if worker is not None else models[0]

    def merged(self, workers: list) -> list[dict]:
        """One document per GPU model, each validated (DocumentError carries it as `document`)."""
        models = sorted({w.model for w in workers})
        grouped: dict[str, list] = {m: [] for m in models}
        for case_id, (case, document, worker) in self.cases.items():
            grouped.setdefault(self._model_of(worker, models), []).append(
                (case_id, case, [document] if document else [])
            )
        for case_id, points in self.points.items():
            for model, case, docs in self._swept(case_id, points, models):
                grouped.setdefault(model, []).append((case_id, case, docs))
        documents = []
        for model, entries in grouped.items():
            if not entries:
                continue
            entries.sort(key=lambda e: self.order.get(e[0], len(self.order)))
            ran = [w for w in workers if w.model == model]
            documents.append(self._document(model, entries, ran))
        return documents

    def _swept(self, case_id: str, points: dict, models: list[str]):
        """(model, the case block, its points' documents) for each model a swept case's points
        ran on, a point of another model recorded as skipped, naming that model."""
        by_model: dict[str, dict[str, tuple]] = {}
        for point, (block, document, worker) in points.items():
            by_model.setdefault(self._model_of(worker, models), {})[point] = (block, document)
        for model, here in by_model.items():
            at = {point: block for point, (block, _) in here.items()}
            for point, (_, _, worker) in points.items():
                if point not in here:
                    elsewhere = self._model_of(worker, models)
                    block = measured_at(self.skeletons[case_id], point)
                    why = f"case {case_id}[{point}]: run on a {elsewhere}: in that model's document"
                    block.update(status="skipped", error={"phase": "setup", "message": why})
                    at[point] = block
            docs = [document for _, document in here.values() if document]
            yield model, merge_points(self.skeletons[case_id], at), docs

    def _document(self, model: str, entries: list, workers: list) -> dict:
        docs = [d for _, _, case_docs in entries for d in case_docs]
        first = docs[0] if docs else None
        environment = dict(first["environment"]) if first else dict(workers[0].environment)
        environment.setdefault("sensors_start", None)
        environment.setdefault("sensors_end", None)
        environment.setdefault("toolchains", {})
        if docs:
            last = max(docs, key=lambda d: d.get("finished_utc") or "")  # the run's last reading
            environment["sensors_end"] = last["environment"].get("sensors_end")
            toolchains = {}
            for doc in docs:
                toolchains.update(doc["environment"].get("toolchains") or {})
            environment["toolchains"] = toolchains
            shared = [d["environment"]["sharing"] for d in docs if d["environment"].get("sharing")]
            if shared:
                environment["sharing"] = {
                    "checked": all(s.get("checked") for s in shared),
                    "shared": any(s.get("shared") for s in shared),
                    "why": "; ".join(sorted({s.get("why", "") for s in shared if s.get("shared")}))
                    or shared[0].get("why", ""),
                }
        environment["devices"] = [
            {
                "index": int(w.ordinal) if w.ordinal.isdigit() else 0,
                "uuid": w.device.get("uuid"),
                "name": w.device.get("name"),
                "host": w.host,
                "worker": w.name,
            }
            for w in workers
        ]
        environment["workers"] = [w.record() for w in workers]
        cases = [case for _, case, _ in entries]
        document = {
            "schema_version": RESULT_SCHEMA_VERSION,
            "kind": "kernelgap.result",
            "complete": True,
            "suite": first["suite"] if first else self.fallback_suite,
            "options": {**(first["options"] if first else {}), **self.options},
            "environment": environment,
            "started_utc": min([self.started, *(d["started_utc"] for d in docs)]),
            "finished_utc": max([_utc_now(), *(d["finished_utc"] or "" for d in docs)]),
            "cases": cases,
            "summary": summary(cases),
        }
        try:
            validate(document, "result", f"the merged {model} document")
        except DocumentError as exc:
            exc.document = document
            raise
        return document

    def write(self, workers: list) -> list[tuple[Path | None, str | None]]:
        """Merge and save each model's document under out/: [(path, problem)]."""
        written = []
        for document in self.merged(workers):
            data = encode(document, pretty=True)
            kept = keep(self.out, result_name(document), data)
            written.append((kept.path, kept.problem))
        return written


def suite_block(raw: bytes, toml: dict, path: str, commit: str | None) -> dict:
    """The document's suite block as the host reads the manifest (for a model with no runner
    document: every case lost before one was written)."""
    suite = toml.get("suite") if isinstance(toml.get("suite"), dict) else {}
    sha, dirty = (commit or "").removesuffix("-dirty") or None, (commit or "").endswith("-dirty")
    block = {
        "name": str(suite.get("name", "suite")),
        "version": suite.get("version") if isinstance(suite.get("version"), int) else 1,
        "path": path,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "gpu": suite.get("gpu") if isinstance(suite.get("gpu"), str) else None,
        "commit": sha,
        "dirty": dirty if commit else None,
    }
    if isinstance(suite.get("primary"), str) and suite["primary"]:
        block["primary"] = suite["primary"]
    return block
