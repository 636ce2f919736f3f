"""`runner check`: validate a suite and build every implementation without a GPU (CI runs it).

The report goes to stderr, like `runner build`'s: stdout carries documents only (there is none
here), and the verdict is the exit status.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import tempfile
from pathlib import Path

import click

from protocol.progress import visible
from runner.definition import manifest, sweep
from runner.definition.spec import check_launch
from runner.errors import (
    BuildError,
    BundleError,
    LaunchLimitError,
    ManifestError,
    PtxError,
    SignatureError,
    ToolchainMissing,
)
from runner.execution.result import case_skeleton
from runner.execution.suite import build_case, obtain_ptx
from runner.explain import static
from runner.gpu import ptx
from runner.measurement.gate.correctness import edges_problems, passing_null_models

REFERENCE_START_S = 5.0  # a forked child's start, beyond the reference's own time


def _say(text: str) -> None:
    """One report line; compilers' messages and names in it keep no control characters."""
    click.echo(visible(text, lines=True), err=True)


def assemble(ptx_text: str, arch: str) -> str | None:
    """Run ptxas on the PTX; returns None when it assembles, else ptxas's message."""
    ptxas = static.find_program("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kernelgap-ptxas-") as tmp:
        src = Path(tmp) / "module.ptx"
        src.write_text(ptx_text.rstrip("\0"))  # ptxas rejects the NUL the driver wants
        done = subprocess.run(
            [ptxas, f"-arch={arch}", str(src), "-o", str(Path(tmp) / "module.cubin")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return None if done.returncode == 0 else (done.stderr or done.stdout).strip()


def _launch_problem(case: manifest.CaseSpec, arch: str) -> str | None:
    """Why the case's launch (at its timed and its check dims) exceeds what `arch` allows, or
    None; the loader already refused what no GPU allows."""
    for dims in (case.dims, case.check_dims):
        geometry = case.geometry(dims)
        try:
            check_launch(
                geometry.grid, geometry.block, geometry.shared_bytes, where=case.where, arch=arch
            )
        except LaunchLimitError as exc:
            return str(exc)
    return None


def _reference_checks(suite: manifest.Suite, case: manifest.CaseSpec) -> tuple:
    """(the null models the case's tolerance admits, or why its reference could not run: raised,
    hung, wrong shape; the problems of its outputs on the edges of the inputs' valid ranges)."""
    try:
        admitted: list[str] | str = passing_null_models(suite, case)
    except ManifestError as exc:
        admitted = str(exc)
    try:
        edges = edges_problems(suite, case)
    except ManifestError as exc:
        edges = [f"(the reference could not run on the edges inputs: {exc})"]
    return admitted, edges


def _bounded_reference_checks(suite: manifest.Suite, case: manifest.CaseSpec) -> tuple:
    """_reference_checks in a child process, ended at twice the case's timeout_s (each call is
    also bounded by it inside, where its code can be interrupted): a reference that swallows
    the interruption, blocks the signal or never leaves C code ends as one that raised, as
    `runner bench`'s worker does."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_send_checks, args=(suite, case, send), daemon=True)
    child.start()
    send.close()
    limit_s = 2 * case.settings.timeout_s + REFERENCE_START_S
    try:
        if receive.poll(limit_s):
            return receive.recv()
        why = f"did not return within {limit_s:g} s (twice the case's timeout_s); ended"
    except EOFError:
        child.join()
        why = f"ended its process with status {child.exitcode} before it returned"
    finally:
        child.kill()
        child.join()
        receive.close()
    return f"{case.where}: reference {case.reference} {why}", []


def _send_checks(suite: manifest.Suite, case: manifest.CaseSpec, send) -> None:
    try:
        send.send(_reference_checks(suite, case))
    except BaseException as exc:
        send.send((f"{case.where}: reference {case.reference} failed: {exc!r}", []))


def _tolerance_problems(suite: manifest.Suite, case: manifest.CaseSpec, say=_say) -> int:
    """Fail a case whose tolerance admits a null model (or whose reference cannot run); note
    where the reference gives non-finite values on the edges of the inputs' valid ranges.
    Returns the failures (0 or 1)."""
    failures = 0
    admitted, edges = _bounded_reference_checks(suite, case)
    if isinstance(admitted, str):  # raised, hung, wrong shape: named, no traceback
        failures += 1
        say(f"FAIL  {case.id}: reference: {admitted}")
    elif admitted:
        failures += 1
        say(
            f"FAIL  {case.id}: tolerance: outputs that did not do the work pass it at the check "
            f"size: {'; '.join(admitted)} (tighten the tolerance or make the data less degenerate)"
        )
    for problem in edges:  # a note: the gate still compares those outputs (inf == inf)
        say(f"note  {case.id}: valid ranges: {problem}")
    return failures


def _check_options(case: manifest.CaseSpec, arch: str, bundle, skipped: dict, say=_say) -> int:
    """Build, signature-check and assemble the implementation of each option point of `case`
    as that point builds it; the failures."""
    options = case.sweep.options if case.sweep is not None else None
    failures = 0
    for point in case.sweep.points if options is not None else ():
        if point.option is None:
            continue
        impl = sweep.at_point(case, point.id).impl(options.impl)
        where = f"{case.id}[{point.id}]/{impl.name}"
        try:
            text, build = obtain_ptx(case, impl, arch, bundle)
            module = ptx.parse(text)
            ptx.check_signature(module, impl.entry, case.signature(), where=where)
        except ToolchainMissing as exc:
            skipped.setdefault(str(exc), []).append(where)
            say(f"skip  {where}: {exc}")
            continue
        except (BuildError, BundleError, PtxError, SignatureError) as exc:
            failures += 1
            say(f"FAIL  {where}: build: {exc}")
            continue
        problem = assemble(text, arch)
        failures += problem is not None
        how = f"ptxas -arch={arch} ok" if static.find_program("ptxas") else "not assembled"
        say(
            f"FAIL  {where}: ptxas -arch={arch}: {problem}" if problem else
            f"ok    {where}: flags {' '.join(build['flags']) or '(none)'}, PTX {module.target}, {how}"
        )  # fmt: skip
    return failures


def check_suite(
    suite: manifest.Suite,
    arch: str,
    require_all: bool = False,
    sanitizer=None,
    bundle=None,
    say=_say,
) -> int:
    """Print one line per implementation (through `say`: `runner check -q` keeps the failures),
    then a summary that counts the skipped ones by reason;
    0 when every buildable implementation assembles (and, with `require_all`, none was skipped).
    With `sanitizer` (runner.execution.sanitize.Sanitizer), each one that assembles is then
    launched once under compute-sanitizer; any error it reports (or a run that fails) fails.
    With `bundle` (runner.definition.bundle.Bundle), PTX it holds is taken instead of built."""
    failures = 0
    skipped: dict[str, list[str]] = {}  # reason -> case/impl
    have_ptxas = static.find_program("ptxas") is not None
    for case in suite.cases:
        problem = _launch_problem(case, arch)
        if problem:
            failures += 1
            say(f"FAIL  {case.id}: launch: {problem}")
            continue
        doc = case_skeleton(case)
        notes: list[str] = []
        built = build_case(case, arch, doc, notes.append, bundle)
        baseline = doc["implementations"].get(case.baseline.name, {})
        if doc["status"] == "failed" and baseline.get("status") == "skipped":
            # Nothing failed: the baseline's compiler is missing here, so no implementation of
            # the case can be checked against it. Every one of them is a skip, with the reason.
            for name, impl in doc["implementations"].items():
                reason = impl.get("skip_reason") or (
                    f"its baseline {case.baseline.name} could not be built here"
                )
                skipped.setdefault(reason, []).append(f"{case.id}/{name}")
                say(f"skip  {case.id}/{name}: {reason}")
            continue
        if doc["status"] == "failed":
            failures += 1
            say(f"FAIL  {case.id}: {doc['error']['phase']}: {doc['error']['message']}")
            for note in notes:  # e.g. why the baseline was skipped
                say(f"      {note.strip()}")
            continue
        failures += _tolerance_problems(suite, case, say)
        for name, impl in doc["implementations"].items():
            if name not in built:
                reason = impl.get("skip_reason", "not built")
                skipped.setdefault(reason, []).append(f"{case.id}/{name}")
                say(f"skip  {case.id}/{name}: {reason}")
                continue
            problem = assemble(built[name], arch)
            if problem:
                failures += 1
                say(f"FAIL  {case.id}/{name}: ptxas -arch={arch}: {problem}")
            else:
                how = f"ptxas -arch={arch} ok" if have_ptxas else "ptxas not found: not assembled"
                say(
                    f"ok    {case.id}/{name}: {impl['toolchain']}, PTX {impl['ptx']['version']} {impl['ptx']['target']}, {how}"
                )
                if sanitizer is not None and not sanitizer.implementation(
                    case, name, impl["entry"], built[name]
                ):
                    failures += 1
        failures += _check_options(case, arch, bundle, skipped, say)
    count = sum(len(v) for v in skipped.values())
    _say(
        f"{suite.path}: {len(suite.cases)} case(s), {failures} failure(s), {count} skipped"
        + (" (--require-all: skips fail the check)" if require_all and count else "")
    )
    for reason, where in skipped.items():
        _say(f"  skipped {len(where)}: {reason} ({', '.join(where)})")
    return 1 if failures or (require_all and count) else 0
