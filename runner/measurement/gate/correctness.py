"""The correctness gate: every implementation is checked before anything is timed.

Each implementation runs twice at the case's correctness size on the declared inputs, its
output buffers poisoned first with all-ones bytes (NaN for floats) and then with 0x5A bytes.
An element that no thread writes keeps a poison value and so fails against the reference in
at least one of the two runs, whatever its expected value. It then runs once more on the
second input set, the edges of each input's valid range (zeros, signed zeros, both ends,
every magnitude; spec.INPUT_SETS), so a shortcut exact only for the declared range fails.
Outputs are compared with the case's numpy reference and with the baseline's outputs, and
with the null models of rounding (null_models): an output that resembles a lower
precision's is refused whatever the tolerance. Inputs are compared bit for bit with what the
generator wrote, so a kernel that writes to a buffer declared `input` is caught; guard bands of
NaN canaries around every buffer catch writes past either end and poison reads past them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runner.definition import manifest
from runner.definition.reference import call_reference, load_reference
from runner.definition.spec import INPUT_SETS, CaseSpec, Geometry
from runner.errors import ManifestError
from runner.gpu import driver, generator
from runner.measurement.gate import null_models
from runner.measurement.gate.elements import Tolerance, compare

POISON_BYTES = (0xFF, 0x5A)


def poison_pattern(dtype: str, byte: int) -> np.ndarray:
    return np.frombuffer(
        bytes([byte]) * np.dtype(generator.DTYPES[dtype]).itemsize, dtype=generator.DTYPES[dtype]
    )


def unwritten(runs: list[np.ndarray], dtype: str) -> int:
    """Elements that still hold the poison of their run in every run: nobody wrote them."""
    left = np.ones(runs[0].shape, dtype=bool)
    for out, byte in zip(runs, POISON_BYTES, strict=True):
        pattern = poison_pattern(dtype, byte)[0]
        left &= out.view(np.dtype(f"u{out.itemsize}")) == pattern.view(np.dtype(f"u{out.itemsize}"))
    return int(np.count_nonzero(left))


# The canary word of the guard bands, repeated: as f32, and as f64 (two words), a quiet NaN
# with payload 0xA7A7..., which survives arithmetic, so an element read past a buffer's end
# poisons what it feeds; as i32/u32 2146969511 and as i64/u64 about 9.2e18, values near the top
# of the range that wrap or dominate visibly. (fmin/fmax-style code drops a NaN: not caught.)
GUARD_WORD = 0x7FF8A7A7
GUARD_PATTERN = np.frombuffer(np.uint32(GUARD_WORD).tobytes(), dtype=np.uint8)


class DeviceBuffers:
    """The case's buffers on the device at one geometry, filled by the device generator.

    With `guard_bytes` (a multiple of 8), each buffer sits between two guard bands of that
    many canary bytes (GUARD_WORD), so a kernel writing just past either end of a buffer is
    caught instead of landing in allocation padding or in a neighbour, and one reading past
    either end reads a NaN (floats) or a huge value (integers).
    """

    def __init__(
        self,
        case: CaseSpec,
        geometry: Geometry,
        internal,
        stream: driver.Stream,
        guard_bytes: int = 0,
    ):
        self.case, self.geometry, self.internal, self.stream = case, geometry, internal, stream
        if guard_bytes % 8:
            raise ValueError(f"guard_bytes must be a multiple of 8 (got {guard_bytes})")
        self.guard_bytes = guard_bytes
        self._allocations: dict[str, driver.Buffer] = {}
        self.buffers: dict[str, driver.Buffer] = {}
        try:
            for b in case.buffers:
                nbytes = geometry.lengths[b.name] * np.dtype(generator.DTYPES[b.dtype]).itemsize
                allocation = driver.Buffer(nbytes + 2 * guard_bytes)
                self._allocations[b.name] = allocation
                self.buffers[b.name] = allocation.view(guard_bytes, nbytes)
            self.fill_guards()
        except BaseException:
            self.free()
            raise

    def _guards(self, name: str) -> tuple[driver.Buffer, driver.Buffer]:
        allocation, g = self._allocations[name], self.guard_bytes
        return allocation.view(0, g), allocation.view(allocation.nbytes - g, g)

    def fill_guards(self) -> None:
        if self.guard_bytes:
            for name in self.buffers:
                for band in self._guards(name):
                    band.fill_words(GUARD_WORD, self.stream)

    def guard_damage(self) -> dict[str, tuple[int, int]]:
        """{buffer: (bytes changed before its start, bytes changed past its end)} where any changed."""
        damage = {}
        expected = np.tile(GUARD_PATTERN, self.guard_bytes // GUARD_PATTERN.size)
        for name in self.buffers if self.guard_bytes else ():
            before, after = (
                int(np.count_nonzero(band.download(np.uint8) != expected))
                for band in self._guards(name)
            )
            if before or after:
                damage[name] = (before, after)
        return damage

    def fill_inputs(self, reseed: int | None = None, input_set: str = "declared") -> None:
        """(Re)generate every input and inout buffer on the device (spec.INPUT_SETS); with
        `reseed`, from each buffer's seed XOR `reseed` (other inputs of the same distributions)."""
        for b in self.case.buffers:
            dist = b.inputs(input_set)
            if dist is not None:
                n = self.geometry.lengths[b.name]
                seed = b.seed if reseed is None else (b.seed ^ reseed) & generator.MASK64
                tail = generator.launch_args(b.dtype, dist, seed, generator.stream_id(b.name), n)
                self.internal.fill_random(self.stream, self.buffers[b.name], n, tail)

    def poison_outputs(self, byte: int) -> None:
        for b in self.case.buffers:
            if b.role == "output":
                self.buffers[b.name].fill_bytes(byte, self.stream)

    def host_inputs(self, input_set: str = "declared") -> dict[str, np.ndarray]:
        """The numpy twin of what fill_inputs(input_set) writes."""
        return host_inputs(self.case, self.geometry, input_set)

    def download(self, name: str) -> np.ndarray:
        spec = self.case.buffer(name)
        return self.buffers[name].download(
            generator.DTYPES[spec.dtype], self.geometry.lengths[name]
        )

    def kernel_args(self) -> driver.KernelArgs:
        values = []
        for p in self.case.params:
            values.append(
                ("ptr", self.buffers[p.buffer].ptr)
                if p.kind == "ptr"
                else (p.kind, self.geometry.scalars[p.name])
            )
        return driver.KernelArgs(values)

    def free(self) -> None:
        for allocation in self._allocations.values():
            allocation.free()
        self._allocations.clear()
        self.buffers.clear()


def host_inputs(
    case: CaseSpec, geometry: Geometry, input_set: str = "declared"
) -> dict[str, np.ndarray]:
    """The generated inputs of `case` at `geometry`, computed on the CPU (bit-identical to the
    device generator)."""
    return {
        b.name: generator.generate(
            b.dtype,
            b.inputs(input_set),
            b.seed,
            generator.stream_id(b.name),
            geometry.lengths[b.name],
        )
        for b in case.buffers
        if b.dist is not None
    }


def expected_outputs(
    case: CaseSpec, geometry: Geometry, reference, host_inputs: dict
) -> dict[str, np.ndarray]:
    """Run the numpy reference on copies of the generated inputs; one array per written buffer."""
    result = call_reference(
        reference, case, geometry, {k: v.copy() for k, v in host_inputs.items()}
    )
    expected = {}
    for b in case.buffers:
        if not b.written:
            continue
        if b.name not in result:
            raise ManifestError(
                f"{case.where}: reference {case.reference}: returned no array for output {b.name!r}"
            )
        array = np.asarray(result[b.name]).reshape(-1)
        if array.size != geometry.lengths[b.name]:
            raise ManifestError(
                f"{case.where}: reference {case.reference}: output {b.name!r} has {array.size} elements, "
                f"expected {geometry.lengths[b.name]}"
            )
        expected[b.name] = array
    return expected


@dataclass
class InputSet:
    """One set of inputs the gate runs every implementation on, with what it must output."""

    name: str  # one of spec.INPUT_SETS
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    # {description: null_models.Model}: what lower-precision shortcuts would output
    shortcuts: dict = field(default_factory=dict)
    # the shortcuts that the case's tolerance accepts (reported: the tolerance is too loose)
    admitted: list[str] = field(default_factory=list)


def output_dtypes(case: CaseSpec) -> dict[str, str]:
    """{written buffer: numpy dtype name}: what the kernels write (the reference may be wider)."""
    return {b.name: np.dtype(generator.DTYPES[b.dtype]).name for b in case.buffers if b.written}


def input_sets(case: CaseSpec, geometry: Geometry, reference, tol: Tolerance) -> list[InputSet]:
    """Every input set of spec.INPUT_SETS with the reference's outputs and the rounding models."""
    sets = []
    for name in INPUT_SETS:
        inputs = host_inputs(case, geometry, name)
        expected = expected_outputs(case, geometry, reference, inputs)
        shortcuts = null_models.models(
            inputs,
            expected,
            lambda x: expected_outputs(case, geometry, reference, x),
            output_dtypes(case),
        )
        admitted = [
            what
            for what, model in shortcuts.items()
            if all(compare(model.outputs[n], expected[n], tol)["mismatches"] == 0 for n in expected)
        ]
        sets.append(InputSet(name, inputs, expected, shortcuts, admitted))
    return sets


def run_checked(
    buffers: DeviceBuffers, launch, byte: int, input_set: str = "declared"
) -> tuple[dict[str, np.ndarray], dict]:
    """Fresh inputs and guards, poisoned outputs, one launch; every buffer's contents afterwards
    and the guard bands it damaged."""
    buffers.fill_guards()
    buffers.fill_inputs(input_set=input_set)
    buffers.poison_outputs(byte)
    launch()
    buffers.stream.synchronize()
    return {b.name: buffers.download(b.name) for b in buffers.case.buffers}, buffers.guard_damage()


def _compare_outputs(
    record: dict, case: CaseSpec, run: dict, inputs: InputSet, byte: int, tol, shortcuts: bool
):
    """The run's written buffers against the reference and (with `shortcuts`) the rounding
    models."""
    for b in case.buffers:
        if not b.written:
            continue
        found = compare(run[b.name], inputs.expected[b.name], tol)
        found.update(
            {
                "against": "reference",
                "buffer": b.name,
                "poison": f"0x{byte:02X}",
                "inputs": inputs.name,
            }
        )
        record["against"].append(found)
        if found["mismatches"]:
            record["problems"].append(
                f"{b.name}: {found['mismatches']} of {found['elements']} elements differ from the "
                f"reference on the {inputs.name} inputs (poison 0x{byte:02X}; first at index "
                f"{found['first_mismatch']['index']}: got {found['first_mismatch']['got']}, "
                f"expected {found['first_mismatch']['expected']})"
            )
        for what, model in inputs.shortcuts.items() if shortcuts else ():
            seen = null_models.resemblance(
                run[b.name],
                inputs.expected[b.name],
                model.outputs[b.name],
                model.precision,
                atol=tol.atol,
            )
            if seen is None:
                continue
            seen.update({"null_model": what, "buffer": b.name, "inputs": inputs.name})
            record["rounding_shortcuts"].append(seen)
            record["problems"].append(
                f"{b.name}: on the {inputs.name} inputs the output resembles the null model "
                f"{what!r} ({seen['why']}: median relative distance {seen['median_rel_to_model']:.3g} "
                f"to it, {seen['median_rel_to_reference']:.3g} to the reference, over "
                f"{seen['elements']} elements it moves): computed in lower precision?"
            )


def _inputs_untouched(record: dict, case: CaseSpec, run: dict, inputs: InputSet) -> None:
    for b in case.buffers:
        if b.written or b.name in record["inputs_modified"]:
            continue
        if not np.array_equal(run[b.name].view(np.uint8), inputs.inputs[b.name].view(np.uint8)):
            record["inputs_modified"].append(b.name)
            record["problems"].append(
                f'{b.name}: the kernel wrote to this buffer, which is declared role = "input"; '
                'declare it role = "inout" so that it is reset before every run'
            )


def _guards_intact(record: dict, damage: dict, guard_bytes: int, inputs: str) -> None:
    for name, (before, after) in damage.items():
        if name in record["out_of_bounds_writes"]:
            continue
        record["out_of_bounds_writes"][name] = {"bytes_before": before, "bytes_after": after}
        record["problems"].append(
            f"{name}: the kernel wrote outside the buffer on the {inputs} inputs ({before} bytes "
            f"changed in the {guard_bytes} before its start, {after} in the {guard_bytes} past "
            "its end)"
        )


def check_impl(
    case: CaseSpec,
    buffers: DeviceBuffers,
    launch,
    sets: list[InputSet],
    tol: Tolerance,
) -> tuple[dict, dict]:
    """Gate one implementation on every input set (the first, the declared inputs, at both
    poisons; the others once). Returns (check record, its outputs of the first run)."""
    record = {
        "status": "passed",
        "tolerance": tol.describe(),
        "against": [],
        "unwritten_elements": 0,
        "inputs_modified": [],
        "out_of_bounds_writes": {},
        "rounding_shortcuts": [],
        "inputs_checked": [s.name for s in sets],
        "inputs_passed": [],
        "problems": [],
        "dims": dict(buffers.geometry.dims),
    }
    admitted = [f"{what} ({s.name} inputs)" for s in sets[:1] for what in s.admitted]
    if admitted:
        record["tolerance_admits"] = admitted
    first_outputs = None
    for position, inputs in enumerate(sets):
        before = len(record["problems"])
        bytes_ = POISON_BYTES if position == 0 else POISON_BYTES[:1]
        results = [run_checked(buffers, launch, byte, inputs.name) for byte in bytes_]
        runs = [contents for contents, _ in results]
        if first_outputs is None:
            first_outputs = runs[0]
        _guards_intact(record, results[0][1], buffers.guard_bytes, inputs.name)
        for i, (run, byte) in enumerate(zip(runs, bytes_, strict=True)):
            _compare_outputs(record, case, run, inputs, byte, tol, shortcuts=i == 0)
            _inputs_untouched(record, case, run, inputs)
        if len(runs) == len(POISON_BYTES):
            for b in case.buffers:
                if b.role == "output":
                    left = unwritten([run[b.name] for run in runs], b.dtype)
                    record["unwritten_elements"] += left
                    if left:
                        record["problems"].append(f"{b.name}: {left} elements were never written")
        if len(record["problems"]) == before:
            record["inputs_passed"].append(inputs.name)
    if record["problems"]:
        record["status"] = "failed"
    return record, first_outputs


def cross_check(
    record: dict,
    outputs: dict,
    baseline_name: str,
    baseline_outputs: dict,
    case: CaseSpec,
    tol: Tolerance,
) -> None:
    """Compare a candidate's outputs with the baseline's (same tolerance) and record the result."""
    for b in case.buffers:
        if b.written:
            found = compare(outputs[b.name], baseline_outputs[b.name], tol)
            found.update({"against": f"baseline:{baseline_name}", "buffer": b.name})
            record["against"].append(found)
            if found["mismatches"]:
                record["status"] = "failed"
                record["problems"].append(
                    f"{b.name}: {found['mismatches']} elements differ from baseline {baseline_name}"
                )


# -- runner check: the null models and the edges of the inputs ---------------------------------


def _matching_input(array: np.ndarray, length: int, dtype: np.dtype) -> np.ndarray:
    return np.resize(array, length).astype(dtype)


def suite_null_models(
    case: manifest.CaseSpec, geometry: Geometry, reference, inputs: dict, expected: dict
) -> dict[str, dict[str, np.ndarray]]:
    """{description: {written buffer: array}} for every null model that applies to the case."""
    models: dict[str, dict[str, np.ndarray]] = {
        null_models.ZEROS: {name: np.zeros_like(e) for name, e in expected.items()},
    }
    constant = {}
    for name, e in expected.items():
        finite = e[np.isfinite(e)] if e.dtype.kind == "f" else e
        value = finite.mean() if finite.size else 0
        constant[name] = np.full_like(e, value if e.dtype.kind == "f" else int(np.round(value)))
    models["a constant (the mean of the expected output)"] = constant
    for b in case.buffers:
        if b.name not in inputs:
            continue
        copy = {
            name: _matching_input(inputs[b.name], e.size, e.dtype)
            for name, e in expected.items()
            if inputs[b.name].dtype == e.dtype
        }
        if copy and len(copy) == len(expected):
            what = (
                f"{b.name} untouched (a kernel that did nothing)"
                if b.written
                else f"a copy of input {b.name}"
            )
            models[what] = copy
    names = list(inputs)
    partial = null_models.partial_models(
        [inputs[n] for n in names],
        names,
        lambda changed: expected_outputs(
            case, geometry, reference, dict(zip(names, changed, strict=True))
        ),
    )
    models.update(
        null_models.distinguishable(
            partial,
            lambda model: all(
                np.array_equal(model[n].view(np.uint8), expected[n].view(np.uint8))
                for n in expected
            ),
        )
    )
    for what, model in null_models.models(
        inputs,
        expected,
        lambda x: expected_outputs(case, geometry, reference, x),
        output_dtypes(case),
    ).items():
        models[what] = model.outputs
    return models


def passing_null_models(suite: manifest.Suite, case: manifest.CaseSpec) -> list[str]:
    """The null models that the case's tolerance accepts at its check size (empty is good),
    each with its figure: the largest relative error it shows against the reference."""
    geometry = case.geometry(case.check_dims)
    reference = load_reference(suite, case)
    inputs = host_inputs(case, geometry)
    expected = expected_outputs(case, geometry, reference, inputs)
    tol = Tolerance.of(case)
    models = suite_null_models(case, geometry, reference, inputs, expected)
    passing = null_models.passing(
        models,
        lambda outputs: all(
            compare(outputs[n], expected[n], tol)["mismatches"] == 0 for n in expected
        ),
    )
    return [f"{what} ({_worst_error(models[what], expected, tol)})" for what in passing]


def _worst_error(outputs: dict, expected: dict, tol: Tolerance) -> str:
    """The figure a refusal gives: the model's largest relative error, beside the tolerance."""
    worst = max((compare(outputs[n], expected[n], tol)["max_rel_err"] or 0.0) for n in expected)
    return f"max relative error {worst:.3g} within {tol.describe()}"


def edges_problems(suite: manifest.Suite, case: manifest.CaseSpec) -> list[str]:
    """Where the reference, on the edges of the inputs' valid ranges at the check size, gives
    non-finite outputs: the case must declare the ranges its arithmetic holds for."""
    geometry = case.geometry(case.check_dims)
    reference = load_reference(suite, case)
    with np.errstate(all="ignore"):
        expected = expected_outputs(case, geometry, reference, host_inputs(case, geometry, "edges"))
    problems = []
    for name, e in expected.items():
        bad = np.flatnonzero(~np.isfinite(e)) if e.dtype.kind == "f" else np.array([], int)
        if bad.size:
            problems.append(
                f"{name}: the reference gives {bad.size} non-finite values of {e.size} on the "
                f"edges of the inputs' valid ranges (first at index {int(bad[0])}); declare "
                "each input's valid = { min = ..., max = ... } for the values the case's "
                "arithmetic and tolerance hold for"
            )
    return problems
