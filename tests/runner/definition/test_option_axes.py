"""Option axes (issue 54): a case sweeps how one implementation is built (extra flags, another
arch, another value of a variable its command template declares) as it sweeps dims. Each value
but the headline is a point of its own at the case's dims, `axis=value`, whose implementation
is built that way and recorded (command, flags, PTX .target, hashes); the headline value is the
implementation as declared, so the case's own number and series stay what they were."""

from __future__ import annotations

import stat

import pytest

from runner.definition import lock, manifest, sweep, toolchains
from runner.gpu import ptx as ptx_module
from tests.runner.definition.test_manifest import rejection, write_suite

DIMS = "dims = { n = 1000 }"
BASELINE = 'toolchain = "nvcc"\nsource = "kernels/scale.cu"'
CLANG_O = (
    '\n[case.options]\nimpl = "cuda"\naxis = "O"\nheadline = "O3"\n'
    'values = { O3 = {}, O1 = { flags = ["-O1"] }, O2 = { flags = ["-O2"] } }\n'
)


def with_options(tmp_path, options: str, dims: str = DIMS, impl: str = BASELINE):
    """The minimal suite with its implementation as `impl` and `options` after it."""
    path = write_suite(tmp_path, BASELINE, impl)
    path.write_text(path.read_text().replace(DIMS, dims) + options)
    return path


def test_an_option_axis_is_a_point_per_value_its_headline_the_case_as_declared(tmp_path):
    case = manifest.load(with_options(tmp_path, CLANG_O)).case("scale")
    assert case.sweep.axes == ("O",) and case.sweep.headline == "O=O3"
    assert [p.id for p in case.sweep.points] == ["O=O3", "O=O1", "O=O2"]
    assert all(p.dims == case.dims and p.check_dims == case.check_dims for p in case.sweep.points)
    assert sweep.at_point(case, "O=O3").impls == case.impls  # the headline: as declared
    impl = sweep.at_point(case, "O=O1").impl("cuda")
    assert impl.flags == ("-O1",) and impl.option == "O1" and impl.arch is None


def test_an_option_axis_beside_dims_axes_adds_its_points_at_the_headline_dims(tmp_path):
    path = with_options(
        tmp_path, CLANG_O, dims='dims = { n = 1048576 }\naxes = { n = ["2^12", "2^20"] }'
    )
    case = manifest.load(path).case("scale")
    assert case.sweep.axes == ("n", "O") and case.sweep.headline == "n=2^20"
    assert [p.id for p in case.sweep.points] == ["n=2^12", "n=2^20", "O=O1", "O=O2"]
    point = case.sweep.point("O=O2")
    assert point.dims == {"n": 1048576} and point.build == {"impl": "cuda", "flags": ["-O2"]}


def test_each_option_point_is_built_its_own_way_and_recorded(tmp_path):
    """clang's -O level, a real build: the flags and command recorded, the PTX its own."""
    clang_impl = 'toolchain = "clang"\nsource = "kernels/scale.cu"'
    case = manifest.load(with_options(tmp_path, CLANG_O, impl=clang_impl)).case("scale")
    builds = {
        pid: toolchains.build_impl(sweep.at_point(case, pid).impl("cuda"), "sm_80")
        for pid in ("O=O3", "O=O1")
    }
    assert builds["O=O1"].flags == ["-O1"] and builds["O=O1"].command[-4] == "-O1"
    assert builds["O=O3"].flags == [] and "-O1" not in builds["O=O3"].command
    assert builds["O=O1"].ptx_sha256 != builds["O=O3"].ptx_sha256
    assert all(ptx_module.parse(b.ptx).target == "sm_80" for b in builds.values())


def test_a_command_templates_declared_variables_and_arch_are_option_values(tmp_path):
    compiler = tmp_path / "mycc"
    compiler.write_text(
        '#!/bin/sh\nprintf ".version 7.0\\n.target %s\\n.address_size 64\\n// %s\\n" "$1" "$2"\n'
    )
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    impl = (
        f'toolchain = "command"\ncommand = "{compiler} {{arch}} {{opt}} {{source}}"\n'
        'vars = { opt = "-O2" }\nsource = "kernels/scale.cu"'
    )
    options = (
        '\n[case.options]\nimpl = "cuda"\naxis = "ptx"\nheadline = "as_built"\n'
        'values = { as_built = {}, sm_90 = { arch = "sm_90" }, '
        'O3 = { vars = { opt = "-O3" } } }\n'
    )
    case = manifest.load(with_options(tmp_path, options, impl=impl)).case("scale")
    built = {
        pid: toolchains.build_impl(sweep.at_point(case, pid).impl("cuda"), "sm_70")
        for pid in ("ptx=as_built", "ptx=sm_90", "ptx=O3")
    }
    assert built["ptx=as_built"].command[1:3] == ["sm_70", "-O2"]
    assert built["ptx=sm_90"].command[1:3] == ["sm_90", "-O2"]
    assert ".target sm_90" in built["ptx=sm_90"].ptx
    assert built["ptx=O3"].command[1:3] == ["sm_70", "-O3"] and "// -O3" in built["ptx=O3"].ptx


@pytest.mark.parametrize(
    ("options", "impl", "fragment"),
    [
        (CLANG_O.replace('impl = "cuda"', 'impl = "nosuch"'), BASELINE,
         "options.impl: no implementation 'nosuch' (implementations: cuda)"),
        (CLANG_O.replace('axis = "O"', 'axis = "n"'), BASELINE,
         "options.axis: 'n' is a dimension of the case"),
        (CLANG_O.replace('headline = "O3"', 'headline = "O9"'), BASELINE,
         "options.headline: 'O9' is not one of the values (O3, O1, O2)"),
        (CLANG_O.replace("O3 = {}", 'O3 = { flags = ["-O3"] }'), BASELINE,
         "options.values.O3: the headline value is implementation 'cuda' as declared"),
        (CLANG_O.replace('O1 = { flags = ["-O1"] }', 'O1 = { vars = { opt = "1" } }'), BASELINE,
         "options.values.O1.vars.opt: not a variable implementation 'cuda' declares (its vars: none)"),
        (CLANG_O.replace('O1 = { flags = ["-O1"] }', 'O1 = { arch = "sm90" }'), BASELINE,
         "options.values.O1.arch: 'sm90' does not match"),
        ("", BASELINE + '\nvars = { opt = "-O2" }',
         "impl 'cuda': vars: only a toolchain = \"command\" template has variables"),
        ("", 'toolchain = "command"\ncommand = "cc {source}"\nvars = { arch = "x" }\nsource = "kernels/scale.cu"',
         "impl 'cuda': vars.arch: {arch} is filled in by kernelgap"),
        ("", 'toolchain = "command"\ncommand = "cc {opt} {source}"\nsource = "kernels/scale.cu"',
         "unknown placeholder {opt}"),
    ],
)  # fmt: skip
def test_a_bad_option_axis_is_refused_at_load_naming_case_and_field(
    tmp_path, options, impl, fragment
):
    message = rejection(with_options(tmp_path, options, impl=impl))
    assert "case 'scale'" in message and fragment in message, message


def test_option_points_are_locked_as_points_and_a_changed_value_needs_a_bump(tmp_path):
    path = with_options(tmp_path, CLANG_O)
    assert lock.record(manifest.load(path)) == [("scale", 1)]
    assert '"O=O1" = "' in lock.lock_path(manifest.load(path)).read_text()
    assert lock.verify(manifest.load(path)) == []
    path.write_text(path.read_text().replace('flags = ["-O1"]', 'flags = ["-O1", "-g"]'))
    problems = lock.verify(manifest.load(path))
    assert len(problems) == 1 and "point O=O1" in problems[0] and "bump" in problems[0]


def test_a_bundle_holds_each_option_points_build_and_gives_it_back(tmp_path):
    from runner.definition.bundle import Bundle, write_bundle

    clang_impl = 'toolchain = "clang"\nsource = "kernels/scale.cu"'
    (tmp_path / "suite").mkdir()
    suite = manifest.load(with_options(tmp_path / "suite", CLANG_O, impl=clang_impl))
    made = write_bundle(suite, "sm_80", tmp_path / "bundle", static=False)
    entries = {(e["impl"], e.get("option")): e for e in made["implementations"]}
    assert set(entries) == {("cuda", None), ("cuda", "O1"), ("cuda", "O2")}
    assert entries[("cuda", "O1")]["file"] == "scale/cuda+O1.ptx"
    assert entries[("cuda", "O1")]["build"]["flags"] == ["-O1"]
    bundle, case = Bundle.load(tmp_path / "bundle"), suite.case("scale")
    ptx, provenance = bundle.lookup(case, sweep.at_point(case, "O=O1").impl("cuda"))
    assert ".target sm_80" in ptx
    assert (
        provenance["flags"] == ["-O1"]
        and provenance["ptx_sha256"] != (bundle.lookup(case, case.impl("cuda"))[1]["ptx_sha256"])
    )


def test_runner_check_builds_and_assembles_each_option_point(tmp_path, capsys):
    from runner.execution.checking import check_suite

    clang_impl = 'toolchain = "clang"\nsource = "kernels/scale.cu"'
    bad = CLANG_O.replace('O2 = { flags = ["-O2"] }', 'O2 = { flags = ["--no-such-flag"] }')
    suite = manifest.load(with_options(tmp_path, bad, impl=clang_impl))
    assert check_suite(suite, "sm_80") == 1
    said = capsys.readouterr().err
    assert "ok    scale[O=O1]/cuda: flags -O1, PTX sm_80" in said, said
    assert "FAIL  scale[O=O2]/cuda: build: " in said and "--no-such-flag" in said, said
