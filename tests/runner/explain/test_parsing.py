"""runner.explain's readers of tool text and its occupancy arithmetic, on recorded text (no tools
needed): ptxas -v logs of two CUDA generations, cuobjdump and nvdisasm listings, the instruction
classes, loops, and theoretical occupancy against cuda_occupancy.h's arithmetic done by hand."""

from __future__ import annotations

import pytest

from runner.errors import AssemblyError, UnknownArch
from runner.explain import static

PTXAS_13 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'attention_f32_naive' for 'sm_90'
ptxas info    : Function properties for attention_f32_naive
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 8208 bytes smem
ptxas info    : Compile time = 108.036 ms
"""
PTXAS_11 = """\
ptxas info    : 0 bytes gmem, 24 bytes cmem[3]
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, 380 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compiling entry function 'other' for 'sm_80'
ptxas info    : Function properties for other
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 360 bytes cmem[0]
"""
CUOBJDUMP = """\

Fatbin elf code:
================
arch = sm_90
code version = [1,7]

\tcode for sm_90
\t\tFunction : k
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000fe20000000800 */
        /*0010*/                   LDG.E.64.CONSTANT R2, desc[UR4][R2.64] ;   /* 0x0000000402027981 */
        /*0020*/                   LDS.128 R4, [R0] ;                         /* 0x0000000000047984 */
        /*0030*/                   DFMA R6, R2, R4, R6 ;                      /* 0x0000000402067229 */
        /*0040*/               @P0 BRA 0x20 ;                                 /* 0xfffffffc00f00947 */
        /*0050*/                   LD.E R8, desc[UR4][R10.64] ;               /* 0x000000040a087980 */
        /*0060*/              @!P1 STG.E.U8 desc[UR4][R10.64], R8 ;           /* 0x000000080a009986 */
        /*0070*/                   DMUL R6, R6, R6 ;                          /* 0x0000000606067228 */
        /*0080*/               @P2 BRA P3, 0x10 ;                             /* 0xfffffff800e02947 */
        /*0090*/                   IMAD.MOV.U32 R3, RZ, RZ, R2 ;              /* 0x000000ffff037224 */
        /*00a0*/                   EXIT ;                                     /* 0x000000000000794d */
        /*00b0*/                   BRA 0xb0;                                  /* 0xfffffffc00fc7947 */
        /*00c0*/                   NOP;                                       /* 0x0000000000007918 */
\t\t..........

\t\tFunction : j
        /*0000*/                   EXIT ;                                     /* 0x000000000000794d */
"""
NVDISASM = """\
\t.section\t.text.k,"ax",@progbits
k:
.text.k:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   LDG.E.64.CONSTANT R2, desc[UR4][R2.64] ;
.L_x_0:
        /*0020*/                   LDS.128 R4, [R0] ;
        /*0030*/                   DFMA R6, R2, R4, R6 ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
        /*0050*/                   LD.E R8, desc[UR4][R10.64] ;
        /*0060*/              @!P1 STG.E.U8 desc[UR4][R10.64], R8 ;
        /*0070*/                   DMUL R6, R6, R6 ;
        /*0080*/               @P2 BRA P3, `(.L_x_1) ;
        /*0090*/                   IMAD.MOV.U32 R3, RZ, RZ, R2 ;
        /*00a0*/                   EXIT ;
.L_x_2:
        /*00b0*/                   BRA `(.L_x_2);
        /*00c0*/                   NOP;
"""


def test_ptxas_13_resources_with_shared_memory_and_barriers():
    assert static.resources(PTXAS_13, "attention_f32_naive") == {
        "stack_bytes": 0,
        "spill_store_bytes": 0,
        "spill_load_bytes": 0,
        "registers": 32,
        "barriers": 1,
        "shared_static_bytes": 8208,
    }


def test_older_ptxas_logs_with_spills_and_constant_banks_per_function():
    found = static.parse_resources(PTXAS_11)
    assert found["k"] == {
        "stack_bytes": 48,
        "spill_store_bytes": 40,
        "spill_load_bytes": 36,
        "registers": 255,
        "barriers": 0,
        "shared_static_bytes": 0,
        "constant_bytes": {"bank0": 380, "bank2": 8},
    }
    assert found["other"]["registers"] == 8
    with pytest.raises(AssemblyError, match="no resource usage for entry 'nope'"):
        static.resources(PTXAS_11, "nope")


def test_cuobjdump_listing_per_function_with_guards_and_targets():
    functions = static.parse_listing(CUOBJDUMP)
    assert list(functions) == ["k", "j"] and [i.opcode for i in functions["j"]] == ["EXIT"]
    k = functions["k"]
    assert len(k) == 13 and k[1].opcode == "LDG.E.64.CONSTANT" and k[1].base == "LDG"
    assert (k[4].guard, k[4].target) == ("@P0", 0x20)
    assert (k[8].guard, k[8].target) == ("@P2", 0x10)  # a predicate operand before the target
    assert k[6].guard == "@!P1" and k[11].target == 0xB0  # the self-branch at the end


def test_nvdisasm_labels_resolve_to_the_same_instructions():
    via_labels = static.parse_listing(NVDISASM)["k"]
    via_addresses = static.parse_listing(CUOBJDUMP)["k"]
    assert [(i.address, i.opcode, i.guard, i.target) for i in via_labels] == [
        (i.address, i.opcode, i.guard, i.target) for i in via_addresses
    ]


def test_classes_widths_qualifiers_and_the_padding_left_out():
    mix = static.mix(static.parse_listing(CUOBJDUMP)["k"])
    assert mix["total"] == 11  # 13 less the NOP and the trailing BRA to itself
    c = mix["classes"]
    assert (c["global_load"], c["generic_load"], c["shared_load"], c["global_store"]) == (
        1,
        1,
        1,
        1,
    )
    assert (c["fp64_fma"], c["fp64_mul"], c["move"], c["constant_load"]) == (1, 1, 1, 1)
    assert c["branch"] == 3 and c["predicated"] == 1  # the guarded STG; branches are apart
    rows = {r["opcode"]: r for rows in mix["memory"].values() for r in rows}
    assert rows["LDG.E.64.CONSTANT"]["width_bits"] == 64
    assert rows["LDG.E.64.CONSTANT"]["qualifiers"] == ["CONSTANT"]
    assert rows["LDS.128"]["width_bits"] == 128 and rows["LD.E"]["width_bits"] == 32
    assert rows["STG.E.U8"]["width_bits"] == 8


def test_loops_nest_and_the_inner_one_is_innermost():
    found = static.loops(static.parse_listing(CUOBJDUMP)["k"])
    spans = [(lp["start"], lp["end"], lp["innermost"]) for lp in found]
    assert spans == [(0x10, 0x80, False), (0x20, 0x40, True)]
    inner = found[1]
    assert inner["instructions"] == 3 and inner["classes"]["fp64_fma"] == 1
    assert inner["classes"]["shared_load"] == 1 and "global_load" not in inner["classes"]


@pytest.mark.parametrize(
    ("block", "registers", "shared", "blocks", "occ", "limited_by"),
    [
        (256, 14, 0, 8, 1.0, ["warps"]),  # polynomial_f64: 8 x 8 warps = 64
        (256, 64, 0, 4, 0.5, ["registers"]),  # 2048 regs/warp: 8 warps per partition, 32 in all
        (256, 40, 0, 6, 0.75, ["registers"]),  # 1280 regs/warp: 12 per partition, 48 warps
        (1024, 32, 8208, 2, 1.0, ["warps", "registers"]),  # attention_f32_naive
        (128, 16, 48 * 1024, 4, 0.25, ["shared_memory"]),  # 233472 // (49152 + 1024)
        (32, 8, 0, 32, 0.5, ["blocks"]),  # one-warp blocks: the 32-block limit binds
        (1024, 72, 0, 0, 0.0, ["registers"]),  # 72 x 32 x 32 warps > 64K: does not fit
    ],
)
def test_theoretical_occupancy_on_sm_90(block, registers, shared, blocks, occ, limited_by):
    limits = static.limits_for("sm_90")
    result = static.theoretical(block, registers, shared, limits)
    assert (result["blocks_per_sm"], result["occupancy"], result["limited_by"]) == (
        blocks,
        occ,
        limited_by,
    )


def test_limits_name_their_source_and_the_device_wins_when_it_has_them():
    table = static.limits_for("sm_90a")
    assert table["registers_per_sm"] == 65536 and table["threads_per_sm"] == 2048
    assert table["blocks_per_sm"] == 32 and table["shared_bytes_per_sm"] == 228 * 1024
    assert table["register_allocation_unit"] == 256 and table["shared_allocation_unit"] == 128
    assert "Programming Guide" in table["source"] and "9.0" in table["source"]
    device = {
        "max_registers_per_sm": 65536,
        "max_threads_per_sm": 1536,
        "max_blocks_per_sm": 24,
        "max_shared_bytes_per_sm": 102400,
        "reserved_shared_bytes_per_block": 1024,
    }
    measured = static.limits_for("sm_89", device)
    assert measured["threads_per_sm"] == 1536 and "cuDeviceGetAttribute" in measured["source"]
    assert static.limits_for("sm_89", {**device, "max_blocks_per_sm": None})["source"] == (
        table["source"].replace("9.0", "8.9")
    )
    with pytest.raises(UnknownArch, match="sm_52"):
        static.limits_for("sm_52")
