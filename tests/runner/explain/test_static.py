"""runner.explain's static analysis on real cubins, built during the test: polynomial_f64's CUDA
baseline (nvcc) and WarpForth candidate (warpforthc), assembled with ptxas and disassembled with
cuobjdump (and nvdisasm). Every figure is compared with what the tools themselves print, read here
by the plainest means (a regex on ptxas -v, counting opcode words in cuobjdump -sass), and an
edited kernel must change the report. Each test skips, with the reason, where a tool is missing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from runner.definition import manifest, toolchains
from runner.errors import ToolchainMissing, ToolMissing
from runner.explain import static

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "benchmarks" / "cases.toml"
ARCH = "sm_90"
CASE = "polynomial_f64"


def need_tools() -> None:
    if static.find("ptxas") is None:
        pytest.skip("ptxas is not installed (the CUDA toolkit)")
    if static.find("cuobjdump") is None:
        pytest.skip("cuobjdump is not installed: pip install -e '.[test]' brings its wheel")


def build(impl_name: str, source: Path | None = None) -> str:
    case = manifest.load(SUITE).case(CASE)
    impl = case.impl(impl_name)
    try:
        return toolchains.build(
            impl.toolchain, source or impl.source, ARCH, impl.flags, impl.command
        ).ptx
    except ToolchainMissing as exc:
        pytest.skip(f"{impl_name}: {exc}")


@pytest.fixture(scope="module")
def ptx() -> dict[str, str]:
    need_tools()
    return {name: build(name) for name in ("cuda", "warpforth")}


def tool_output(ptx_text: str, tmp_path: Path, name: str) -> tuple[str, str]:
    """(ptxas -v log, cuobjdump -sass listing), run directly, as a person would."""
    src, cubin = tmp_path / f"{name}.ptx", tmp_path / f"{name}.cubin"
    src.write_text(ptx_text.rstrip("\0"))
    log = subprocess.run(
        [static.find("ptxas"), "-v", f"-arch={ARCH}", str(src), "-o", str(cubin)],
        capture_output=True,
        text=True,
        check=True,
    )
    listing = subprocess.run(
        [static.find("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True, check=True
    )
    return log.stdout + log.stderr, listing.stdout


def opcode_words(listing: str) -> list[str]:
    """The opcode of every instruction line of a cuobjdump listing: the first capitalised word
    after the /*addr*/ and an optional @predicate."""
    found = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", listing)
    return found


@pytest.mark.parametrize("name", ["cuda", "warpforth"])
def test_resources_are_what_ptxas_prints(ptx, name, tmp_path):
    log, _ = tool_output(ptx[name], tmp_path, name)
    result = static.analyze(ptx[name], CASE, ARCH, 256)
    assert result["status"] == "ok", result
    used = re.search(r"Used (\d+) registers, used (\d+) barriers", log)
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill", log)
    r = result["resources"]
    assert (r["registers"], r["barriers"]) == (int(used[1]), int(used[2]))
    assert (r["stack_bytes"], r["spill_store_bytes"], r["spill_load_bytes"]) == tuple(
        int(g) for g in frame.groups()
    )
    smem = re.search(r"(\d+) bytes smem", log)
    assert r["shared_static_bytes"] == (int(smem[1]) if smem else 0)


@pytest.mark.parametrize("name", ["cuda", "warpforth"])
def test_instruction_classes_are_what_cuobjdump_prints(ptx, name, tmp_path):
    _, listing = tool_output(ptx[name], tmp_path, name)
    words = opcode_words(listing)
    result = static.analyze(ptx[name], CASE, ARCH, 256)
    mix = result["instructions"]
    bases = [w.split(".")[0] for w in words]
    assert mix["total"] == len(words) - bases.count("NOP") - 1  # less the trailing BRA to itself
    for cls, opcode in (("fp64_fma", "DFMA"), ("fp64_mul", "DMUL"), ("fp64_add", "DADD"),
                        ("global_load", "LDG"), ("global_store", "STG"),
                        ("generic_load", "LD"), ("generic_store", "ST")):  # fmt: skip
        assert mix["classes"].get(cls, 0) == bases.count(opcode), (cls, opcode)
    for opcode, n in mix["opcodes"].items():
        assert words.count(opcode) == n
    by_width = {r["opcode"]: r for rows in mix["memory"].values() for r in rows}
    for opcode, row in by_width.items():
        assert row["count"] == words.count(opcode)
        assert row["width_bits"] == (64 if ".64" in opcode else 32)


def test_the_baseline_fuses_and_warpforth_does_not(ptx):
    cuda = static.analyze(ptx["cuda"], CASE, ARCH, 256)["instructions"]
    forth = static.analyze(ptx["warpforth"], CASE, ARCH, 256)["instructions"]
    # Horner's rule of degree 128: nvcc fuses 127 multiply-adds; warpforthc keeps F* F+ apart
    assert cuda["classes"]["fp64_fma"] == 127 and "fp64_mul" not in cuda["classes"]
    assert "fp64_fma" not in forth["classes"]
    assert forth["classes"]["fp64_mul"] >= 127 and forth["classes"]["fp64_add"] >= 128
    assert [r["opcode"] for r in cuda["memory"]["global_load"]] == ["LDG.E.64.CONSTANT"]
    assert [r["opcode"] for r in forth["memory"]["generic_load"]] == ["LD.E.64"]
    assert all(loop["innermost"] for loop in cuda["loops"]) and len(forth["loops"]) == 1
    assert forth["in_loops"]["fp64_add"] == forth["classes"]["fp64_add"]  # all in the loop


def test_one_more_f_plus_shows_one_more_dadd(ptx, tmp_path):
    original = (ROOT / "benchmarks/kernels/polynomial_f64.forth").read_text()
    assert "  NIP\n" in original
    edited = tmp_path / "polynomial_f64.forth"
    edited.write_text(original.replace("  NIP\n", "  0.5 F+\n  NIP\n", 1))
    before = static.analyze(ptx["warpforth"], CASE, ARCH, 256)["instructions"]
    after = static.analyze(build("warpforth", edited), CASE, ARCH, 256)["instructions"]
    assert after["classes"]["fp64_add"] == before["classes"]["fp64_add"] + 1
    assert after["opcodes"]["DADD"] == before["opcodes"]["DADD"] + 1
    assert after["total"] == before["total"] + 1
    assert after["classes"]["fp64_mul"] == before["classes"]["fp64_mul"]


def test_nvdisasm_and_cuobjdump_give_the_same_instructions(ptx, tmp_path):
    if static.find("nvdisasm") is None:
        pytest.skip("nvdisasm is not installed: pip install -e '.[test]' brings its wheel")
    assembled = static.assemble(ptx["warpforth"], ARCH)
    via_cuobjdump = static.function(static.disassemble(assembled.cubin), CASE)
    cubin = tmp_path / "module.cubin"
    cubin.write_bytes(assembled.cubin)
    listing = subprocess.run(
        [static.find("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True, check=True
    )
    via_nvdisasm = static.parse_listing(listing.stdout)[CASE]
    assert [(i.address, i.opcode, i.guard, i.target) for i in via_cuobjdump] == [
        (i.address, i.opcode, i.guard, i.target) for i in via_nvdisasm
    ]
    assert static.mix(via_cuobjdump) == static.mix(via_nvdisasm)


def test_a_missing_disassembler_is_reported_with_how_to_install(monkeypatch, ptx):
    monkeypatch.setattr(static, "disassembler", lambda: (_ for _ in ()).throw(
        ToolMissing("neither cuobjdump nor nvdisasm was found: pip install -e '.[explain]'")
    ))  # fmt: skip
    result = static.analyze(ptx["cuda"], CASE, ARCH, 256)
    assert result == {
        "status": "unavailable",
        "reason": "neither cuobjdump nor nvdisasm was found: pip install -e '.[explain]'",
    }


def test_ptx_that_ptxas_refuses_is_a_failed_analysis_with_its_message():
    need_tools()
    result = static.analyze(".version 8.0\n.target sm_90\nnot ptx at all\n", CASE, ARCH, 256)
    assert result["status"] == "failed" and "ptxas -arch=sm_90" in result["reason"]


def test_the_wheels_tools_are_found_without_cuda_pathfinder(monkeypatch):
    """cuda-python 12.6.x (the floor) has no cuda.pathfinder: ptxas, cuobjdump and nvdisasm from
    NVIDIA's wheels are still found, through the wheels' bin/ folders."""
    from runner.explain import static

    if not static.wheel_bin_dirs():
        pytest.skip("NVIDIA's CUDA wheels are not installed here (the test extra brings them)")
    monkeypatch.setattr(static, "_pathfinder", lambda name: None)
    monkeypatch.setenv("PATH", "/nonexistent")
    static.find.cache_clear()
    try:
        for name in ("ptxas", "cuobjdump", "nvdisasm"):
            found = static.find(name)
            assert found is not None and Path(found).parent in static.wheel_bin_dirs(), name
    finally:
        static.find.cache_clear()
