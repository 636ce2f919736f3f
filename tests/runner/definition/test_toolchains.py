"""runner.definition.toolchains: nvcc, NVRTC, clang and command templates, with the real compilers.

Every compiled PTX is assembled by `ptxas -arch=sm_90` and its entry read back by runner.gpu.ptx, so
a toolchain that emits something the driver would reject fails here. A test whose compiler is not
installed skips and says which one.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest

from runner.definition import manifest, toolchains
from runner.definition.toolchains import clang, command, nvrtc
from runner.errors import BuildError, ToolchainMissing
from runner.execution import checking
from runner.explain import static
from runner.gpu import ptx

ARCH = "sm_90"
COMPILERS = ("nvcc", "nvrtc", "clang")

# exp/sqrt (libdevice and single instructions), static shared memory and a barrier; the macro
# proves that the implementation's flags reach the compiler.
SOURCE = r"""
#ifndef TILE
#error "TILE must be given with -DTILE=..."
#endif
extern "C" __global__ void softexp(const double* __restrict__ x, double* __restrict__ y,
                                   float* __restrict__ z, double scale, long long n, int shift)
{
    __shared__ double tile[TILE];
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? exp(x[i] * scale) : 0.0;
    __syncthreads();
    if (i < n) {
        y[i] = sqrt(tile[(threadIdx.x + shift) % TILE]);
        z[i] = sqrtf(expf((float)tile[threadIdx.x]));
    }
}
"""
FLAGS = ["-DTILE=128"]
# The numpy twin of SOURCE for TILE = 128 (runner check runs null models against it).
SOFTEXP_REFERENCE = """\
import numpy as np


def softexp(x, scale, shift, n):
    t = np.exp(x * scale)
    i = np.arange(n)
    y = np.sqrt(t[i // 128 * 128 + (i % 128 + shift) % 128])
    z = np.sqrt(np.exp(t.astype(np.float32)))
    return {"y": y, "z": z.astype(np.float32)}
"""
PARAM_SIZES = [8, 8, 8, 8, 8, 4]

# A hand-written module that the fake external compiler below "emits" for {arch}.
FAKE_PTX = """\
.version 8.0
.target ARCH
.address_size 64

.visible .entry copy_one(
\t.param .u64 copy_one_param_0,
\t.param .u64 copy_one_param_1
)
{
\t.reg .b64 %rd<5>;
\t.reg .f64 %fd<2>;
\tld.param.u64 %rd1, [copy_one_param_0];
\tld.param.u64 %rd2, [copy_one_param_1];
\tcvta.to.global.u64 %rd3, %rd1;
\tcvta.to.global.u64 %rd4, %rd2;
\tld.global.f64 %fd1, [%rd3];
\tst.global.f64 [%rd4], %fd1;
\tret;
}
"""

# fakecc --arch ARCH SOURCE -o OUTPUT [--fail] [--no-output]: writes SOURCE's text with ARCH put in.
FAKE_COMPILER = """\
import sys
args = sys.argv[1:]
if args == ["--version"]:
    print("fakecc 1.2.3 (kernelgap test double)")
    print("second line")
    sys.exit(0)
if "--fail" in args:
    sys.stderr.write("fakecc: error: unknown word DUP at line 3\\n")
    sys.exit(3)
arch = args[args.index("--arch") + 1]
source, output = args[args.index("--arch") + 2], args[args.index("-o") + 1]
if "--no-output" not in args:
    text = open(source).read().replace("ARCH", arch)
    open(output, "w").write(text)
"""


def require(toolchain: str) -> None:
    """Skip the test, with the reason, when `toolchain`'s compiler is not installed here."""
    if toolchain == "nvcc" and static.find_program("nvcc") is None:
        pytest.skip("nvcc is not on PATH (install the CUDA toolkit)")
    if toolchain == "nvrtc":
        try:
            nvrtc._nvrtc()
        except ToolchainMissing as exc:
            pytest.skip(f"NVRTC is not usable here: {exc}")
    if toolchain == "clang":
        try:
            clang.program()
        except ToolchainMissing as exc:
            pytest.skip(str(exc))


def assemble(ptx_text: str, tmp_path: Path) -> None:
    """ptxas -arch=sm_90 on the PTX; fails the test with ptxas's message."""
    ptxas = static.find_program("ptxas")
    if ptxas is None:
        pytest.skip("ptxas is not on PATH (install the CUDA toolkit)")
    src = tmp_path / "assembled.ptx"
    src.write_text(ptx_text)
    done = subprocess.run(
        [ptxas, f"-arch={ARCH}", str(src), "-o", str(tmp_path / "assembled.cubin")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "softexp.cu"
    path.write_text(SOURCE)
    return path


@pytest.fixture
def fake_compiler(tmp_path) -> Path:
    """An executable Python script standing in for an external compiler such as warpforthc."""
    path = tmp_path / "tools" / "fakecc"
    path.parent.mkdir()
    path.write_text(f"#!{sys.executable}\n{FAKE_COMPILER}")
    path.chmod(0o755)
    return path


# ---- nvcc, NVRTC, clang: one CUDA source, three compilers ----


@pytest.mark.parametrize("toolchain", COMPILERS)
def test_compiles_to_ptx_that_ptxas_assembles(toolchain, source, tmp_path):
    require(toolchain)
    built = toolchains.build(toolchain, source, ARCH, FLAGS)
    module = ptx.parse(built.ptx)
    assert module.target == ARCH
    assert list(module.entries) == ["softexp"]
    assert [p.size_bytes for p in module.entries["softexp"].params] == PARAM_SIZES
    assert re.search(r"\.shared\s+\.align\s+\d+\s+\.b8\s+\S+\[1024\]", built.ptx), "TILE doubles"
    assert "bar.sync" in built.ptx  # __syncthreads
    assert "sqrt.rn.f64" in built.ptx and "sqrt.rn.f32" in built.ptx  # IEEE sqrt, no fast-math
    assert ".extern .func" not in built.ptx  # libdevice's exp was linked in, not left undefined
    assemble(built.ptx, tmp_path)


@pytest.mark.parametrize("toolchain", COMPILERS)
def test_build_records_provenance(toolchain, source):
    require(toolchain)
    built = toolchains.build(toolchain, source, ARCH, FLAGS)
    prov = built.provenance()
    assert prov["toolchain"] == toolchain
    assert prov["flags"] == FLAGS
    assert prov["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert prov["ptx_sha256"] == hashlib.sha256(built.ptx.encode()).hexdigest()
    assert prov["build_s"] > 0
    assert str(source) in prov["command"] and "-DTILE=128" in prov["command"]
    expected_version = {
        "nvcc": r"^Build cuda_\d+",
        "nvrtc": r"^NVRTC \d+\.\d+$",
        "clang": r"clang version \d+\.\d+",
    }[toolchain]
    assert re.search(expected_version, prov["version"]), prov["version"]


@pytest.mark.parametrize("toolchain", COMPILERS)
def test_compiler_errors_carry_the_compilers_message(toolchain, source):
    require(toolchain)
    source.write_text(SOURCE.replace("exp(x[i] * scale)", "exp(x[i] * undefined_scale_xyz)"))
    with pytest.raises(BuildError) as error:
        toolchains.build(toolchain, source, ARCH, FLAGS)
    assert str(source) in str(error.value)
    assert "undefined_scale_xyz" in str(error.value)
    assert not isinstance(error.value, ToolchainMissing)


@pytest.mark.parametrize("toolchain", COMPILERS)
def test_flags_reach_the_compiler(toolchain, source):
    require(toolchain)
    with pytest.raises(BuildError, match="TILE must be given"):
        toolchains.build(toolchain, source, ARCH, [])


@pytest.mark.parametrize("toolchain", COMPILERS)
def test_quoted_includes_resolve_next_to_the_source(toolchain, source):
    require(toolchain)
    (source.parent / "tile.h").write_text("#define TILE 64\n")
    source.write_text('#include "tile.h"\n' + SOURCE)
    built = toolchains.build(toolchain, source, ARCH, [])
    assert re.search(r"\.b8\s+\S+\[512\]", built.ptx)


def test_unknown_toolchain_is_a_build_error(source):
    with pytest.raises(BuildError, match=r"unknown toolchain 'gcc'; expected one of \['clang'"):
        toolchains.build("gcc", source, ARCH)


# ---- NVRTC specifics ----


@pytest.mark.parametrize(
    ("arch", "expected"),
    [("sm_90", "compute_90"), ("sm_90a", "compute_90a"), ("sm_120", "compute_120")],
)
def test_nvrtc_targets_the_virtual_architecture(arch, expected):
    opts = nvrtc.options(Path("k.cu"), arch, ["-DX=1"])
    assert opts[0] == f"--gpu-architecture={expected}"
    assert "-std=c++17" in opts and opts[-1] == "-DX=1"
    assert not any("fast" in o for o in opts)


def test_nvrtc_rejects_a_malformed_arch():
    with pytest.raises(BuildError, match=r"k.cu: arch '90' is not of the form sm_XX"):
        nvrtc.options(Path("k.cu"), "90", [])


@pytest.fixture
def nvrtc_unloadable(monkeypatch):
    """cuda-python's nvrtc as it behaves when libnvrtc is nowhere to be found."""
    import cuda.bindings

    def not_found():
        raise RuntimeError('Failure finding "libnvrtc.so.13 or libnvrtc.so.12": No such file')

    fake = types.SimpleNamespace(nvrtcVersion=not_found)
    monkeypatch.setattr(cuda.bindings, "nvrtc", fake, raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", fake)
    nvrtc._nvrtc.cache_clear()
    nvrtc.version.cache_clear()
    yield
    nvrtc._nvrtc.cache_clear()
    nvrtc.version.cache_clear()


def test_nvrtc_without_libnvrtc_is_skipped_with_a_remedy(nvrtc_unloadable, monkeypatch, source):
    monkeypatch.setattr(toolchains, "cuda_roots", lambda: [])
    with pytest.raises(ToolchainMissing) as error:
        toolchains.build("nvrtc", source, ARCH, FLAGS)
    message = str(error.value)
    assert "libnvrtc could not be loaded (Failure finding" in message
    assert "pip install nvidia-cuda-nvrtc" in message and "CUDA_HOME" in message


def test_nvrtc_fallback_picks_the_newest_libnvrtc_of_the_first_toolkit(monkeypatch, tmp_path):
    first, second = tmp_path / "cuda-a", tmp_path / "cuda-b"
    for name in ("libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc-builtins.so.13.0"):
        (first / "lib64").mkdir(parents=True, exist_ok=True)
        (first / "lib64" / name).write_bytes(b"")
    (second / "lib64").mkdir(parents=True)
    (second / "lib64" / "libnvrtc.so.14").write_bytes(b"")
    monkeypatch.setattr(toolchains, "cuda_roots", lambda: [first, second])
    assert nvrtc._toolkit_libnvrtc() == first / "lib64" / "libnvrtc.so.13"
    monkeypatch.setattr(toolchains, "cuda_roots", lambda: [tmp_path / "empty"])
    assert nvrtc._toolkit_libnvrtc() is None


def test_cuda_roots_puts_the_environment_first_without_duplicates(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", f"{tmp_path}/./")  # the same folder, spelled differently
    roots = toolchains.cuda_roots()
    assert roots[0] == tmp_path
    assert [r.resolve() for r in roots].count(tmp_path.resolve()) == 1
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "does-not-exist"))
    assert tmp_path / "does-not-exist" not in toolchains.cuda_roots()


# ---- clang specifics ----


def test_clang_flags_are_fixed_and_recorded(source):
    require("clang")
    built = toolchains.build("clang", source, ARCH, FLAGS)
    cmd = built.command
    for flag in ("--cuda-device-only", "-nocudainc", "-nocudalib", "-O3", "-S"):
        assert flag in cmd
    assert f"--cuda-gpu-arch={ARCH}" in cmd
    assert cmd[cmd.index("-include") + 1] == str(clang.PRELUDE)
    assert cmd[cmd.index("-mlink-builtin-bitcode") + 2].endswith("libdevice.10.bc")
    assert not any("fast-math" in c for c in cmd)


def test_clang_is_told_the_cuda_installation_so_its_ptx_does_not_depend_on_path(
    monkeypatch, source, tmp_path
):
    """clang chooses the PTX ISA version from the CUDA it detects (an nvcc on PATH): the build
    names the runner's own CUDA root, found the same way with or without nvcc on PATH."""
    require("clang")
    roots = toolchains.cuda_roots()
    if not roots:
        pytest.skip("no CUDA installation (toolkit or NVIDIA's wheels) to point clang at")
    with_path = toolchains.build("clang", source, ARCH, FLAGS)
    assert f"--cuda-path={roots[0]}" in with_path.command
    clang_dir = Path(clang.program()).parent
    monkeypatch.setenv("PATH", str(clang_dir))  # no nvcc on PATH now (unless beside clang)
    without = toolchains.build("clang", source, ARCH, FLAGS)
    assert ptx.parse(without.ptx).version == ptx.parse(with_path.ptx).version
    monkeypatch.setattr(toolchains, "cuda_roots", lambda: [])
    assert not any(c.startswith("--cuda-path") for c in clang.build(source, ARCH, FLAGS, None)[1])


def test_clang_without_libdevice_says_so(monkeypatch, source, tmp_path):
    require("clang")
    monkeypatch.setattr(clang, "find_libdevice", lambda: None)
    monkeypatch.setattr(
        clang, "libdevice_places", lambda: [tmp_path / "nvvm/libdevice/libdevice.10.bc"]
    )
    # a missing libdevice is a missing part of the toolchain: a skip with the reason, not a failure
    with pytest.raises(ToolchainMissing) as error:
        toolchains.build("clang", source, ARCH, FLAGS)
    message = str(error.value)
    assert "calls libdevice functions (__nv_exp, __nv_expf)" in message
    assert "libdevice.10.bc was not found: looked in" in message and str(tmp_path) in message
    monkeypatch.setattr(clang, "libdevice_places", lambda: [])
    with pytest.raises(ToolchainMissing) as error:
        toolchains.build("clang", source, ARCH, FLAGS)
    assert "looked in no" not in str(error.value)
    assert "there is no CUDA toolkit here" in str(error.value)
    assert "pip install 'kernelgap[nvcc]'" in str(error.value)
    # A kernel without math functions does not need libdevice.
    source.write_text(SOURCE.replace("exp(x[i] * scale)", "x[i] * scale").replace("expf(", "("))
    built = toolchains.build("clang", source, ARCH, FLAGS)
    assert "-mlink-builtin-bitcode" not in built.command
    assert "softexp" in ptx.parse(built.ptx).entries


def test_clang_prelude_math_matches_nvcc_overloads(tmp_path):
    """Every prelude function compiles in double and float, and float calls stay in float."""
    require("clang")
    src = tmp_path / "math.cu"
    calls = "exp(v) + log(v) + tanh(v) + rsqrt(v) + pow(v, v) + sqrt(v) + fabs(v) + fmax(v, v) + fmin(v, v) + fma(v, v, v)"
    src.write_text(
        'extern "C" __global__ void math_f64(double* p) { double v = p[threadIdx.x]; p[threadIdx.x] = '
        f"{calls}; }}\n"
        'extern "C" __global__ void math_f32(float* p) { float v = p[threadIdx.x]; p[threadIdx.x] = '
        f"{calls}; }}\n"
    )
    built = toolchains.build("clang", src, ARCH)
    assemble(built.ptx, tmp_path)
    f32_body = built.ptx[built.ptx.index(".entry math_f32") :]
    f32_body = f32_body[: f32_body.index("\n}")]
    assert ".f64" not in f32_body, "a float argument was promoted to double"


# ---- command: an external compiler from a template ----


def template_for(compiler: Path) -> str:
    return f"{shlex.quote(str(compiler))} --arch {{arch}} {{source}} -o {{output}}"


def test_command_template_builds_with_the_external_compiler(fake_compiler, tmp_path):
    src = tmp_path / "copy.fs"
    src.write_text(FAKE_PTX)
    built = toolchains.build("command", src, ARCH, ["--opt", "3"], template_for(fake_compiler))
    module = ptx.parse(built.ptx)
    assert module.target == ARCH
    assert [p.size_bytes for p in module.entries["copy_one"].params] == [8, 8]
    assemble(built.ptx, tmp_path)
    assert built.command[:5] == [str(fake_compiler), "--arch", ARCH, str(src), "-o"]
    assert built.command[5].endswith("copy.ptx") and built.command[6:] == ["--opt", "3"]
    # every line of --version, since many compilers name only their LLVM on the first
    assert built.version == "fakecc 1.2.3 (kernelgap test double); second line"
    assert built.compiler_sha256 == hashlib.sha256(fake_compiler.read_bytes()).hexdigest()
    assert built.provenance()["compiler_sha256"] == built.compiler_sha256
    assert built.provenance()["toolchain"] == "command"


def test_command_keeps_paths_with_spaces_as_one_argument(tmp_path):
    compiler = tmp_path / "my tools" / "fake cc"
    compiler.parent.mkdir()
    compiler.write_text(f"#!{sys.executable}\n{FAKE_COMPILER}")
    compiler.chmod(0o755)
    src = tmp_path / "my kernels" / "copy one.fs"
    src.parent.mkdir()
    src.write_text(FAKE_PTX)
    built = toolchains.build("command", src, ARCH, [], template_for(compiler))
    assert built.command[0] == str(compiler) and built.command[3] == str(src)
    assert "copy_one" in ptx.parse(built.ptx).entries


def test_command_missing_program_is_skipped_with_the_reason(source):
    template = "kernelgap-no-such-compiler --arch {arch} {source} -o {output}"
    with pytest.raises(
        ToolchainMissing,
        match=r"^kernelgap-no-such-compiler is not on PATH; implementation skipped$",
    ):
        toolchains.build("command", source, ARCH, [], template)
    with pytest.raises(ToolchainMissing, match=r"/nowhere/cc does not exist or is not executable"):
        toolchains.build("command", source, ARCH, [], "/nowhere/cc {source} -o {output}")


def test_command_failure_carries_stderr(fake_compiler, source):
    with pytest.raises(BuildError) as error:
        toolchains.build("command", source, ARCH, ["--fail"], template_for(fake_compiler))
    assert "fakecc exited with 3" in str(error.value)
    assert "unknown word DUP at line 3" in str(error.value)


def test_command_that_writes_nothing_is_a_build_error(fake_compiler, source):
    with pytest.raises(BuildError, match=r"exited with 0 but wrote no PTX to \{output\}"):
        toolchains.build("command", source, ARCH, ["--no-output"], template_for(fake_compiler))


@pytest.mark.parametrize(
    ("template_tail", "message"),
    [
        (
            "{source} -o {out}",
            r"unknown placeholder \{out\}; expected \{arch\}, \{source\}, \{output\}",
        ),
        ("{source} -o {output} --opt={level}", r"unknown placeholder \{level\}"),
        ("{source} -o {output} {", r"write \{\{ or \}\} for a literal brace"),
        # a format spec would let a manifest ask for gigabytes of padding (issue 12, item 6)
        ("--arch {arch:>999999999999} {source} -o {output}", r"\{arch\} has a format spec"),
        ("{source!r} -o {output}", r"\{source\} has a format spec or conversion"),
    ],
)
def test_command_template_errors_name_the_problem(fake_compiler, source, template_tail, message):
    with pytest.raises(BuildError, match=message):
        toolchains.build("command", source, ARCH, [], f"{fake_compiler} {template_tail}")


def test_command_without_a_template_says_what_is_needed(source):
    with pytest.raises(BuildError, match=r"needs the implementation's `command` template"):
        toolchains.build("command", source, ARCH, [], None)


def test_command_version_is_unknown_when_the_program_does_not_answer(monkeypatch, tmp_path):
    slow = tmp_path / "slowcc"
    slow.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    slow.chmod(0o755)
    silent = tmp_path / "silentcc"
    silent.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(2)\n")
    silent.chmod(0o755)
    monkeypatch.setattr(command, "VERSION_TIMEOUT_S", 0.5)
    assert command.version(f"{slow} {{source}}") == "unknown"
    assert command.version(f"{silent} {{source}}") == "unknown"


# ---- end to end: `runner check` builds every implementation and reports skips ----


def test_check_builds_each_toolchain_and_reports_a_missing_compiler(
    fake_compiler, tmp_path, capsys
):
    for toolchain in COMPILERS:
        require(toolchain)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "softexp.cu").write_text(SOURCE)
    (tmp_path / "reference.py").write_text(SOFTEXP_REFERENCE)
    impls = "".join(
        f'[[case.impl]]\nname = "{name}"\nrole = "{role}"\ntoolchain = "{tc}"\n'
        f'source = "kernels/softexp.cu"\nentry = "softexp"\nflags = ["-DTILE=128"]\n{extra}\n'
        for name, role, tc, extra in [
            ("cuda", "baseline", "nvcc", ""),
            ("llvm", "candidate", "clang", ""),
            ("rtc", "candidate", "nvrtc", ""),
            (
                "forth",
                "candidate",
                "command",
                'command = "kernelgap-no-such-compiler {source} -o {output}"\n',
            ),
        ]
    )
    (tmp_path / "cases.toml").write_text(
        f"""\
[suite]
name = "toolchains"
version = 1

[[case]]
id = "softexp"
version = 1
description = "y = sqrt(exp(x * scale)) with a shuffle through shared memory"
dims = {{ n = 1024 }}
check_dims = {{ n = 128 }}
grid = "ceil_div(n, 128)"
block = 128
reference = "reference.py:softexp"
tolerance = {{ rtol = 1e-12, atol = 0.0 }}
buffers = [
  {{ name = "x", dtype = "f64", length = "n", role = "input", init = {{ dist = "uniform", low = -1.0, high = 1.0 }} }},
  {{ name = "y", dtype = "f64", length = "n", role = "output" }},
  {{ name = "z", dtype = "f32", length = "n", role = "output" }},
]
params = [
  {{ name = "x", buffer = "x" }},
  {{ name = "y", buffer = "y" }},
  {{ name = "z", buffer = "z" }},
  {{ name = "scale", type = "f64", value = 0.5 }},
  {{ name = "n", type = "i64", value = "n" }},
  {{ name = "shift", type = "i32", value = 1 }},
]

{impls}"""
    )
    status = checking.check_suite(manifest.load(tmp_path / "cases.toml"), ARCH)
    out = capsys.readouterr().err
    assert status == 0, out
    for name in ("cuda", "llvm", "rtc"):
        assert re.search(
            rf"^ok    softexp/{name}: \w+, PTX \S+ {ARCH}, ptxas -arch={ARCH} ok$", out, re.M
        ), out
    assert (
        "skip  softexp/forth: kernelgap-no-such-compiler is not on PATH; implementation skipped"
        in out
    )


@pytest.mark.skipif(static.find_program("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_never_lets_a_path_reach_its_shell(tmp_path):
    # nvcc passes file names through a shell: a folder named like this once ran `touch`.
    folder = tmp_path / "a $(touch canary) `touch canary2`; b"
    folder.mkdir()
    (folder / "common.h").write_text("#define SCALE 2.0\n")
    source = folder / "k;echo x.cu"
    source.write_text(
        '#include "common.h"\nextern "C" __global__ void k(double* y) { y[0] *= SCALE; }\n'
    )
    built = toolchains.build("nvcc", source, "sm_90")
    assert ".entry k(" in built.ptx
    assert str(source) in built.command, "the recorded command names the real source"
    assert not any(p.name.startswith("canary") for p in tmp_path.rglob("*")), (
        "a shell ran part of the path"
    )
    assert not list(Path.cwd().glob("canary*"))


def test_command_without_output_placeholder_reads_ptx_from_stdout(tmp_path):
    """A template without {output} (and without {arch}: a fixed-target compiler such as
    warpforthc) takes the PTX from the compiler's stdout; an empty stdout is a build error."""
    cc = tmp_path / "stdoutcc"
    cc.write_text(
        f"#!{sys.executable}\nimport sys\nif sys.argv[1:] == ['--version']:\n    print('stdoutcc 2')\n"
        "    sys.exit(0)\ntext = open(sys.argv[1]).read()\n"
        "sys.stdout.write('' if 'EMPTY' in text else text.replace('ARCH', 'sm_70'))\n"
    )
    cc.chmod(0o755)
    src = tmp_path / "copy.fs"
    src.write_text(FAKE_PTX)
    built = toolchains.build("command", src, ARCH, [], f"{cc} {{source}}")
    assert ptx.parse(built.ptx).target == "sm_70" and built.command == [str(cc), str(src)]
    assert built.version == "stdoutcc 2"
    src.write_text("EMPTY")
    with pytest.raises(BuildError, match=r"stdoutcc exited with 0 but its stdout is empty"):
        toolchains.build("command", src, ARCH, [], f"{cc} {{source}}")
