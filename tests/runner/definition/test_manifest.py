"""runner.definition.manifest: the suite manifest loads, resolves, and rejects bad input by file, case and field.

Each bad manifest is the minimal valid one below with exactly one edit, so a rejection can only
come from that edit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from runner.definition import manifest
from runner.definition.manifest import DEFAULT_SETTINGS, Settings
from runner.definition.reference import call_reference, load_reference
from runner.errors import ManifestError

ROOT = Path(__file__).resolve().parents[3]

MINIMAL = """\
[suite]
name = "mini"
version = 1

[[case]]
id = "scale"
version = 1
description = "out = a * x"
dims = { n = 1000 }
check_dims = { n = 17 }
grid = "ceil_div(n, 128)"
block = 128
reference = "reference.py:scale"
tolerance = { rtol = 1e-12, atol = 0.0 }
bytes = "8 * n"
flops = "n"
buffers = [
  { name = "x", dtype = "f32", length = "n", role = "input", init = { dist = "uniform", low = -1.0, high = 1.0 } },
  { name = "out", dtype = "f32", length = "n", role = "output" },
]
params = [
  { name = "x", buffer = "x" },
  { name = "out", buffer = "out" },
  { name = "a", type = "f32", value = 2.0 },
  { name = "n", type = "i32", value = "n" },
]

[[case.impl]]
name = "cuda"
role = "baseline"
toolchain = "nvcc"
source = "kernels/scale.cu"
entry = "scale"
"""
CASE_BLOCK = MINIMAL[MINIMAL.index("[[case]]") :]
SECOND_IMPL = '\n[[case.impl]]\nname = "{name}"\nrole = "{role}"\ntoolchain = "ptx"\nsource = "kernels/scale.cu"\nentry = "scale"\n'

KERNEL = """\
extern "C" __global__ void scale(const float* x, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i];
}
"""
REFERENCE = """\
import numpy as np


def scale(x, a):
    return {"out": np.float64(a) * x.astype(np.float64)}


def needs_k(x, k):
    return {"out": x * k}


def not_a_dict(x):
    return x
"""


def write_suite(tmp_path: Path, old: str | None = None, new: str = "") -> Path:
    """The minimal manifest, its kernel and reference.py in tmp_path, with `old` replaced by `new`."""
    text = MINIMAL
    if old is not None:
        if text.count(old) != 1:
            raise ValueError(f"test edit {old!r} must occur exactly once in MINIMAL")
        text = text.replace(old, new)
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "kernels" / "scale.cu").write_text(KERNEL)
    (tmp_path / "reference.py").write_text(REFERENCE)
    path = tmp_path / "cases.toml"
    path.write_text(text)
    return path


def rejection(path: Path) -> str:
    """The ManifestError message of loading `path`; every message starts with the file."""
    with pytest.raises(ManifestError) as info:
        manifest.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message


def test_minimal_manifest_loads(tmp_path):
    path = write_suite(tmp_path)
    suite = manifest.load(path)
    assert (suite.name, suite.version, suite.gpu) == ("mini", 1, None)
    assert suite.root == tmp_path.resolve()
    assert suite.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    case = suite.case("scale")
    assert case.signature() == [("x", "ptr"), ("out", "ptr"), ("a", "f32"), ("n", "i32")]
    assert [(b.name, b.role, b.written) for b in case.buffers] == [
        ("x", "input", False),
        ("out", "output", True),
    ]
    assert case.buffer("x").dist.kind == "uniform" and case.buffer("out").dist is None
    assert case.settings == Settings(**DEFAULT_SETTINGS)
    assert case.buffer("x").seed == DEFAULT_SETTINGS["seed"]
    assert (case.rtol, case.atol, case.exact) == (1e-12, 0.0, False)
    assert case.baseline.name == "cuda"
    assert case.baseline.source == (tmp_path / "kernels" / "scale.cu").resolve()
    assert case.baseline.source_rel == "kernels/scale.cu"


def test_unknown_case_id_lists_the_cases(tmp_path):
    suite = manifest.load(write_suite(tmp_path))
    with pytest.raises(ManifestError, match=r"no case with id 'axpy' \(cases: scale\)"):
        suite.case("axpy")


def test_settings_merge_defaults_then_case(tmp_path):
    path = write_suite(
        tmp_path,
        "block = 128\n",
        'block = 128\nsettings = { mode = "cold", seed = 9 }\n',
    )
    path.write_text(
        path.read_text().replace("[[case]]", "[defaults]\nsamples = 45\nseed = 3\n\n[[case]]")
    )
    case = manifest.load(path).cases[0]
    assert case.settings == Settings(
        **{**DEFAULT_SETTINGS, "samples": 45, "mode": "cold", "seed": 9}
    )
    assert case.buffer("x").seed == 9  # the buffer seed follows the case's settings


def test_integer_output_defaults_to_exact(tmp_path):
    # an integer output compares exactly even though rtol is given
    int_out = '{ name = "out", dtype = "i32", length = "n", role = "output" }'
    f32_out = '{ name = "out", dtype = "f32", length = "n", role = "output" }'
    case = manifest.load(write_suite(tmp_path, f32_out, int_out)).cases[0]
    assert case.exact is True
    # and needs no tolerance at all
    path = write_suite(tmp_path, f32_out, int_out)
    path.write_text(path.read_text().replace("{ rtol = 1e-12, atol = 0.0 }", "{}"))
    assert manifest.load(path).cases[0].exact is True


def test_float_output_without_tolerance_is_rejected(tmp_path):
    message = rejection(
        write_suite(tmp_path, "tolerance = { rtol = 1e-12, atol = 0.0 }", "tolerance = {}")
    )
    assert (
        "case 'scale': tolerance: give rtol and/or atol for float outputs, or exact = true"
        in message
    )


def test_malformed_toml_names_the_file_and_line(tmp_path):
    message = rejection(write_suite(tmp_path, "[suite]", "[suite"))
    assert "malformed TOML" in message and "line 1" in message


def test_non_utf8_manifest_is_malformed_toml(tmp_path):
    path = write_suite(tmp_path)
    path.write_bytes(b"# \xff\n" + path.read_bytes())
    assert "malformed TOML" in rejection(path)


def test_missing_manifest_file(tmp_path):
    message = rejection(tmp_path / "nope.toml")
    assert "cannot read the manifest" in message and "No such file" in message


def test_duplicate_case_id(tmp_path):
    path = write_suite(tmp_path)
    path.write_text(MINIMAL + "\n" + CASE_BLOCK)
    assert "case 'scale': id: duplicate case id" in rejection(path)


# One row per bad input: a table reads better than one item per line, so the formatter skips it.
# fmt: off
REJECTED = [
    # (test id, text replaced, replacement, fragments the message must contain)
    ("unknown_top_level_key", "[suite]", 'owner = "me"\n\n[suite]',
     ["(top level)", "unknown field", "'owner'"]),
    ("unknown_suite_key", "version = 1\n\n[[case]]", "version = 1\nowner = 1\n\n[[case]]",
     ["suite", "unknown field", "'owner'"]),
    ("unknown_case_key", 'id = "scale"\n', 'id = "scale"\nwarps = 4\n',
     ["case 'scale'", "unknown field", "'warps'"]),
    ("unknown_impl_key", 'entry = "scale"\n', 'entry = "scale"\noptimize = true\n',
     ["case 'scale'", "impl[0]", "unknown field", "'optimize'"]),
    ("unknown_tolerance_key", "atol = 0.0 }", "tol = 0.0 }",
     ["case 'scale'", "tolerance", "unknown field", "'tol'"]),
    ("unknown_init_key", "high = 1.0 }", "high = 1.0, mean = 0.0 }",
     ["case 'scale'", "buffers[0].init", "unknown field", "'mean'"]),
    ("unknown_settings_key", "block = 128\n", "block = 128\nsettings = { rounds = 3 }\n",
     ["case 'scale'", "settings", "unknown field", "'rounds'"]),
    ("missing_grid", 'grid = "ceil_div(n, 128)"\n', "",
     ["case 'scale'", "'grid' is a required property"]),
    ("missing_reference", 'reference = "reference.py:scale"\n', "",
     ["case 'scale'", "'reference' is a required property"]),
    ("missing_impl_entry", 'entry = "scale"\n', "",
     ["case 'scale'", "impl[0]", "'entry' is a required property"]),
    ("missing_suite_name", 'name = "mini"\n', "",
     ["suite", "'name' is a required property"]),
    ("suite_version_string", "version = 1\n\n[[case]]", 'version = "1"\n\n[[case]]',
     ["suite.version", "'1' is not of type 'integer'"]),
    ("case_version_string", "version = 1\ndescription", 'version = "1"\ndescription',
     ["case 'scale'", "version", "'1' is not of type 'integer'"]),
    ("case_version_fraction", "version = 1\ndescription", "version = 1.5\ndescription",
     ["case 'scale'", "version", "1.5 is not of type 'integer'"]),
    ("samples_below_30", "block = 128\n", "block = 128\nsettings = { samples = 10 }\n",
     ["case 'scale'", "settings.samples", "10 is less than the minimum of 30"]),
    ("samples_float", "block = 128\n", "block = 128\nsettings = { samples = 30.5 }\n",
     ["case 'scale'", "settings.samples", "30.5 is not of type 'integer'"]),
    ("defaults_samples_float", "[[case]]\n", "[defaults]\nsamples = 32.5\n\n[[case]]\n",
     ["defaults.samples", "32.5 is not of type 'integer'"]),
    ("bad_mode", "block = 128\n", 'block = 128\nsettings = { mode = "warm" }\n',
     ["case 'scale'", "settings.mode", "'warm'", "'hot', 'cold'"]),
    ("dims_empty", "dims = { n = 1000 }", "dims = {}",
     ["case 'scale'", "dims"]),
    ("unknown_toolchain", 'toolchain = "nvcc"', 'toolchain = "gcc"',
     ["case 'scale'", "impl[0].toolchain", "'gcc'", "'nvcc', 'nvrtc', 'clang'"]),
    ("unknown_buffer_dtype", 'dtype = "f32", length = "n", role = "output"',
     'dtype = "f16", length = "n", role = "output"',
     ["case 'scale'", "buffers[1].dtype", "'f16'", "'f32', 'f64', 'i32', 'u32', 'i64', 'u64'"]),
    ("unknown_param_type", 'type = "i32"', 'type = "i16"',
     ["case 'scale'", "params[3].type", "'i16'"]),
    ("bad_buffer_role", 'role = "output"', 'role = "scratch"',
     ["case 'scale'", "buffers[1].role", "'scratch'", "'input', 'output', 'inout'"]),
    ("bad_impl_role", 'role = "baseline"', 'role = "reference"',
     ["case 'scale'", "impl[0].role", "'reference'", "'baseline', 'candidate'"]),
    ("reference_without_function", 'reference = "reference.py:scale"',
     'reference = "reference.py"', ["case 'scale'", "reference", "'reference.py'"]),
    ("param_missing_buffer", '{ name = "out", buffer = "out" }', '{ name = "out", buffer = "y" }',
     ["case 'scale'", "params[1].buffer", "no buffer named 'y'", "(buffers: out, x)"]),
    ("param_buffer_and_type", '{ name = "out", buffer = "out" }',
     '{ name = "out", buffer = "out", type = "f32" }', ["case 'scale'", "params[1]"]),
    ("param_type_without_value", 'type = "i32", value = "n" }', 'type = "i32" }',
     ["case 'scale'", "params[3]"]),
    ("duplicate_param_name", '{ name = "out", buffer = "out" }', '{ name = "x", buffer = "out" }',
     ["case 'scale'", "params[1].name", "duplicate parameter name 'x'"]),
    ("impl_source_missing", 'source = "kernels/scale.cu"', 'source = "kernels/missing.cu"',
     ["case 'scale'", "impl 'cuda'", "source", "kernels/missing.cu not found"]),
    ("reference_file_missing", 'reference = "reference.py:scale"',
     'reference = "missing.py:scale"', ["case 'scale'", "reference", "missing.py not found"]),
    ("no_baseline", 'role = "baseline"', 'role = "candidate"',
     ["case 'scale'", 'exactly one implementation must have role = "baseline"', "found 0"]),
    ("two_baselines", 'entry = "scale"\n',
     'entry = "scale"\n' + SECOND_IMPL.format(name="cuda2", role="baseline"),
     ["case 'scale'", "impl", "found 2: ['cuda', 'cuda2']"]),
    ("duplicate_impl_name", 'entry = "scale"\n',
     'entry = "scale"\n' + SECOND_IMPL.format(name="cuda", role="candidate"),
     ["case 'scale'", "impl[1].name", "duplicate implementation name 'cuda'"]),
    ("duplicate_buffer_name", '{ name = "out", dtype', '{ name = "x", dtype',
     ["case 'scale'", "buffers[1].name", "duplicate buffer name 'x'"]),
    ("no_written_buffer", 'role = "output" }',
     'role = "input", init = { dist = "uniform", low = 0.0, high = 1.0 } }',
     ["case 'scale'", "buffers", "at least one buffer must have role output or inout"]),
    ("length_unknown_name", 'length = "n", role = "output"', 'length = "m", role = "output"',
     ["case 'scale'", "buffers.out.length", "unknown name 'm'", "known names: n"]),
    ("grid_unknown_name", 'grid = "ceil_div(n, 128)"', 'grid = "ceil_div(q, 128)"',
     ["case 'scale'", "grid[0]", "unknown name 'q'"]),
    ("param_value_unknown_name", "value = 2.0", 'value = "2.0 * z"',
     ["case 'scale'", "params.a.value", "unknown name 'z'"]),
    ("bytes_unknown_name", 'bytes = "8 * n"', 'bytes = "8 * n * w"',
     ["case 'scale'", "bytes", "unknown name 'w'"]),
    ("length_not_integer", 'length = "n", role = "output"', 'length = 4.5, role = "output"',
     ["case 'scale'", "buffers.out.length", "expected an integer, got 4.5"]),
    ("length_negative", 'length = "n", role = "output"', 'length = "n - 2000", role = "output"',
     ["case 'scale'", "buffers.out.length", "must be >= 0, got -1000"]),
    ("grid_zero", 'grid = "ceil_div(n, 128)"', 'grid = "n - n"',
     ["case 'scale'", "grid[0]", "must be >= 1, got 0"]),
    ("grid_negative", 'grid = "ceil_div(n, 128)"', "grid = -1",
     ["case 'scale'", "grid[0]", "must be >= 1, got -1"]),
    ("grid_y_zero", 'grid = "ceil_div(n, 128)"', "grid = [1, 0]",
     ["case 'scale'", "grid[1]", "must be >= 1, got 0"]),
    # 7 blocks at n = 1000 but 0 at check_dims n = 17: both sizes are evaluated
    ("grid_zero_at_check_dims", 'grid = "ceil_div(n, 128)"', 'grid = "ceil_div(n, 128) - 1"',
     ["case 'scale'", "grid[0]", "must be >= 1, got 0"]),
    ("block_zero", "block = 128", "block = 0",
     ["case 'scale'", "block[0]", "must be >= 1, got 0"]),
    ("input_without_init", ', init = { dist = "uniform", low = -1.0, high = 1.0 }', "",
     ["case 'scale'", "buffers.x.init", "an input buffer needs an init table"]),
    ("inout_without_init", 'role = "output"', 'role = "inout"',
     ["case 'scale'", "buffers.out.init", "an inout buffer needs an init table"]),
    ("uniform_on_integer_dtype", 'dtype = "f32", length = "n", role = "input"',
     'dtype = "i32", length = "n", role = "input"',
     ["case 'scale'", "buffers.x.init", "i32", "'integers'", "got 'uniform'"]),
    ("integers_on_float_dtype", 'dist = "uniform"', 'dist = "integers"',
     ["case 'scale'", "buffers.x.init", "f32", "'uniform'", "got 'integers'"]),
    ("uniform_low_not_below_high", "low = -1.0, high = 1.0", "low = 1.0, high = 1.0",
     ["case 'scale'", "buffers.x.init", "low < high"]),
    ("check_dims_other_dims", "check_dims = { n = 17 }", "check_dims = { m = 17 }",
     ["case 'scale'", "check_dims", "same dimensions as dims (n)"]),
    ("i32_scalar_out_of_range", 'value = "n" }', 'value = "n * 4096 * 1024" }',
     ["case 'scale'", "params.n.value", "4194304000 does not fit i32", "2147483647"]),
    ("u32_scalar_negative", 'type = "i32", value = "n" }', 'type = "u32", value = -1 }',
     ["case 'scale'", "params.n.value", "-1 does not fit u32"]),
    ("valid_unknown_key", "high = 1.0 } },", "high = 1.0 }, valid = { low = 0.0 } },",
     ["case 'scale'", "buffers[0].valid", "unknown field", "'low'"]),
    ("valid_empty", "high = 1.0 } },", "high = 1.0 }, valid = {} },",
     ["case 'scale'", "buffers[0].valid"]),
    ("valid_min_above_max", "high = 1.0 } },", "high = 1.0 }, valid = { min = 2.0, max = 1.0 } },",
     ["case 'scale'", "buffers.x.valid", "low <= high"]),
    ("valid_narrower_than_init", "high = 1.0 } },", "high = 1.0 }, valid = { min = 0.0 } },",
     ["case 'scale'", "buffers.x.valid", "init range [-1.0, 1.0]", "outside the valid range"]),
    ("valid_past_f32", "high = 1.0 } },", "high = 1.0 }, valid = { max = 1e39 } },",
     ["case 'scale'", "buffers.x.valid", "within +-"]),
    ("valid_on_an_output", '{ name = "out", dtype = "f32", length = "n", role = "output" }',
     '{ name = "out", dtype = "f32", length = "n", role = "output", valid = { min = 0.0 } }',
     ["case 'scale'", "buffers.out.valid", "only a generated buffer"]),
    ("valid_float_bound_on_integers", 'dtype = "f32", length = "n", role = "input", init = { dist = "uniform", low = -1.0, high = 1.0 } },',
     'dtype = "i32", length = "n", role = "input", init = { dist = "integers", low = -1, high = 1 }, valid = { min = -1.5 } },',
     ["case 'scale'", "buffers.x.valid.min", "must be an integer", "-1.5"]),
]
# fmt: on


def test_valid_ranges_default_to_the_dtype_and_drive_the_edges_input_set(tmp_path):
    from runner.gpu.generator import Distribution, full_range

    suite = manifest.load(write_suite(tmp_path))
    x = suite.cases[0].buffer("x")
    assert x.valid is None and x.valid_range == full_range("f32")
    assert x.inputs("edges") == Distribution("edges", *full_range("f32"))
    assert x.inputs("declared") == x.dist and suite.cases[0].buffer("out").inputs("edges") is None
    narrowed = write_suite(tmp_path, "high = 1.0 } },", "high = 1.0 }, valid = { min = -1.0 } },")
    x = manifest.load(narrowed).cases[0].buffer("x")
    assert x.valid == (-1.0, full_range("f32")[1])
    with pytest.raises(ValueError, match="unknown input set 'other'"):
        x.inputs("other")


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [pytest.param(old, new, fragments, id=name) for name, old, new, fragments in REJECTED],
)
def test_bad_manifest_is_rejected_naming_file_case_and_field(tmp_path, old, new, fragments):
    message = rejection(write_suite(tmp_path, old, new))
    missing = [f for f in fragments if f not in message]
    assert not missing, f"message lacks {missing}: {message}"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('{ name = "out", buffer = "out" }', '{ name = "out", buffer = "out", type = "f32" }'),
        ('type = "i32", value = "n" }', 'type = "i32" }'),
    ],
    ids=["buffer_and_type", "type_without_value"],
)
def test_bad_param_message_says_what_a_param_takes(tmp_path, old, new):
    message = rejection(write_suite(tmp_path, old, new))
    assert "any of the given schemas" not in message
    assert "buffer" in message and "type" in message and "value" in message


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("block = 128\n", "block = 128\nsettings = { samples = 30.0 }\n"),
        ("version = 1\ndescription", "version = 1.0\ndescription"),
    ],
    ids=["samples", "case_version"],
)
def test_integral_float_where_an_integer_is_required_is_rejected(tmp_path, old, new):
    rejection(write_suite(tmp_path, old, new))


def test_real_benchmark_manifest_loads():
    suite = manifest.load(ROOT / "benchmarks" / "cases.toml")
    assert (suite.name, suite.version) == ("kernelgap-core", 1)
    case = suite.case("axpy_f64")
    assert [(i.name, i.role, i.toolchain) for i in case.impls] == [
        ("cuda", "baseline", "nvcc"),
        ("llvm", "candidate", "clang"),
        ("warpforth", "candidate", "command"),
        ("handptx", "candidate", "ptx"),
    ]
    assert all(i.source.is_file() for i in case.impls)
    assert suite.primary == "warpforth"
    assert all(c.impl("warpforth").source_rel == f"kernels/{c.id}.forth" for c in suite.cases)
    assert case.signature() == [("x", "ptr"), ("y", "ptr"), ("a", "f64"), ("n", "i64")]
    assert [b.role for b in case.buffers] == ["input", "inout"]
    assert case.settings.seed == 20261129 and case.buffer("y").seed == 20261129
    assert (case.rtol, case.atol, case.exact, case.flop_dtype) == (1e-15, 1e-15, False, "f64")


def test_gpu_suite_manifest_loads():
    suite = manifest.load(ROOT / "tests" / "gpu_suite" / "cases.toml")
    assert [c.id for c in suite.cases] == [
        "scale_aa",
        "scale_double_work",
        "scale_small",
        "printf_noise",
        "fault_oob",
        "fault_hang",
        "bug_unwritten",
        "bug_writes_input",
        "bug_past_end",
        "bug_large_only",
    ]
    hang = suite.case("fault_hang")
    assert hang.settings.timeout_s == 8.0 and [i.name for i in hang.impls] == ["hang"]
    assert suite.case("scale_aa").settings.timeout_s == 60.0
    assert {c.settings.samples for c in suite.cases} == {30}
    assert {c.settings.target_sample_ms for c in suite.cases} == {20.0}
    # no `block` in the cases: the defaults' 256 applies
    assert suite.case("scale_aa").geometry(suite.case("scale_aa").check_dims).block == (256, 1, 1)


def test_resolve_axpy_at_both_sizes():
    case = manifest.load(ROOT / "benchmarks" / "cases.toml").case("axpy_f64")
    n = 134217728
    timed = manifest.resolve(case, case.dims)
    # grid = min(ceil_div(2^27, 256), 4224) = min(524288, 4224)
    assert (timed.grid, timed.block, timed.shared_bytes) == ((4224, 1, 1), (256, 1, 1), 0)
    assert timed.lengths == {"x": n, "y": n}
    assert timed.scalars == {"a": 2.5, "n": n}
    assert type(timed.scalars["a"]) is float and type(timed.scalars["n"]) is int
    assert (timed.bytes, timed.flops) == (3 * 8 * n, 2 * n)
    checked = manifest.resolve(case, case.check_dims)
    # min(ceil_div(100003, 256), 13) = 13 blocks: 30 grid-stride sweeps over 3328 threads
    assert checked.grid == (13, 1, 1) and checked.block == (256, 1, 1)
    assert checked.lengths == {"x": 100003, "y": 100003}
    assert checked.scalars == {"a": 2.5, "n": 100003}
    assert checked.dims == {"n": 100003, "blocks": 13} and case.geometry(case.check_dims) == checked
    # the H200 run recorded the same launch and bytes
    fixture = json.loads((ROOT / "tests" / "fixtures" / "result-1.0.0-h200-axpy.json").read_text())
    recorded = fixture["cases"][0]
    assert tuple(recorded["launch"]["grid"]) == timed.grid
    assert recorded["implementations"]["cuda"]["throughput"]["bytes"] == timed.bytes


def test_resolve_refuses_dims_that_overflow_a_scalar(tmp_path):
    case = manifest.load(write_suite(tmp_path)).cases[0]
    assert manifest.resolve(case, {"n": 2**31 - 1}).scalars["n"] == 2**31 - 1
    with pytest.raises(
        ManifestError, match=r"case 'scale': params\.n\.value: 2147483648 does not fit i32"
    ):
        manifest.resolve(case, {"n": 2**31})


def test_call_reference_passes_only_the_names_it_takes(tmp_path):
    suite = manifest.load(write_suite(tmp_path))
    case = suite.cases[0]
    geometry = case.geometry(case.check_dims)
    x = np.linspace(-1, 1, 17, dtype=np.float32)
    # dims (n), scalars (a, n) and inputs (x) are on offer; scale(x, a) would raise on any other
    result = call_reference(load_reference(suite, case), case, geometry, {"x": x})
    np.testing.assert_array_equal(result["out"], 2.0 * x.astype(np.float64))
    # a function taking **kwargs gets everything, and defaults fill what is not on offer
    assert call_reference(lambda **kw: {"names": sorted(kw)}, case, geometry, {"x": x}) == {
        "names": ["a", "n", "x"]
    }
    assert call_reference(lambda n, k=3: {"out": n * k}, case, geometry, {}) == {"out": 51}


def test_call_reference_rejects_unknown_arguments_and_non_dict_results(tmp_path):
    suite = manifest.load(write_suite(tmp_path, "reference.py:scale", "reference.py:needs_k"))
    case = suite.cases[0]
    geometry = case.geometry(case.check_dims)
    fn = load_reference(suite, case)
    with pytest.raises(ManifestError) as info:
        call_reference(fn, case, geometry, {"x": np.zeros(17, np.float32)})
    message = str(info.value)
    assert message.startswith(f"{suite.path}: case 'scale': reference reference.py:needs_k")
    assert "['k']" in message and "neither dims, params nor buffers" in message
    with pytest.raises(ManifestError, match="must return a dict of output arrays"):
        call_reference(lambda x: x, case, geometry, {"x": np.zeros(17)})


def test_load_reference_names_a_missing_function(tmp_path):
    # load() checks that the file exists; the function is looked up when the reference is loaded
    suite = manifest.load(write_suite(tmp_path, "reference.py:scale", "reference.py:axpy"))
    with pytest.raises(ManifestError) as info:
        load_reference(suite, suite.cases[0])
    assert (
        str(info.value)
        == f"{suite.path}: case 'scale': reference: reference.py has no function 'axpy'"
    )


def test_load_reference_reports_an_import_failure(tmp_path):
    suite = manifest.load(write_suite(tmp_path))
    (tmp_path / "reference.py").write_text("import numpy as np\nraise RuntimeError('broken')\n")
    with pytest.raises(ManifestError) as info:
        load_reference(suite, suite.cases[0])
    message = str(info.value)
    assert "case 'scale': reference: importing reference.py failed" in message
    assert "broken" in message


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("true {arch:>99} {source}", r"placeholder {arch} has a format spec"),
        ("true {source!r}", r"placeholder {source} has a format spec or conversion"),
        ("true {flavour} {source}", r"unknown placeholder {flavour}"),
        ("true 'unbalanced {source}", "No closing quotation"),
    ],
)
def test_a_command_template_that_cannot_be_filled_is_refused_at_load(tmp_path, template, fragment):
    # issue 52: refused at load (what `harness run` does before a target is reached), not at build
    line = 'toolchain = "nvcc"\nsource = "kernels/scale.cu"'
    new = f'toolchain = "command"\ncommand = "{template}"\nsource = "kernels/scale.cu"'
    message = rejection(write_suite(tmp_path, line, new.replace("'", "\\u0027")))
    assert "case 'scale': impl 'cuda': command:" in message and fragment in message, message
