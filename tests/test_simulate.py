"""The SIMT interpreter that checks generated PTX without a GPU: arithmetic, shuffles,
control flow, memory, and the undefined behaviour it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from ptxkit.generators.simulate import SimulationError, launch

HEAD = ".version 8.8\n.target sm_100a\n.address_size 64\n"
REGS = ".reg .f32 %f<8>; .reg .b16 %h<8>; .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;"


def kernel(body: str, params=("out",)) -> str:
    """An entry `k`: %rd0.. are the parameters, %r0 is %tid.x, %rd7 is out + 4·tid."""
    loads = "".join(f"ld.param.u64 %rd{i}, [{name}];\n" for i, name in enumerate(params))
    header = ", ".join(f".param .u64 {name}" for name in params)
    return (f"{HEAD}.visible .entry k({header})\n{{\n{REGS}\n{loads}mov.u32 %r0, %tid.x;\n"
            f"mul.wide.u32 %rd6, %r0, 4;\nadd.s64 %rd7, %rd0, %rd6;\n{body}\nret;\n}}\n")


def run_f32(body: str, threads=32, **arrays):
    out = np.zeros(threads, np.float32)
    launch(kernel(body, ("out", *arrays)), "k", out, *arrays.values(), block=threads)
    return out


def run_u32(body: str, threads=32):
    out = np.zeros(threads, np.uint32)
    launch(kernel(body), "k", out, block=threads)
    return out


def test_butterfly_shuffles_with_and_without_segments():
    body = "cvt.rn.f32.u32 %f0, %r0;\nshfl.sync.bfly.b32 %f1, %f0, 4, 0x1f, 0xffffffff;\nst.global.f32 [%rd7], %f1;"
    assert run_f32(body)[:8].tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    # 8-lane segments, c = ((32 - 8) << 8) | 0x1f: a lane whose partner is in a later
    # segment keeps its own value, one whose partner is in an earlier segment reads it
    segmented = body.replace("4, 0x1f", "8, 0x181f")
    assert run_f32(segmented)[:16].tolist() == list(range(8)) * 2


def test_shuffles_refuse_missing_member_lanes():
    body = "cvt.rn.f32.u32 %f0, %r0;\nshfl.sync.bfly.b32 %f1, %f0, 1, 0x1f, 0xffffffff;"
    with pytest.raises(SimulationError, match="member lanes 0xffff0000 of warp 0 are not executing"):
        run_f32("setp.lt.u32 %p0, %r0, 16;\n@!%p0 bra DONE;\n" + body + "\nDONE:")
    with pytest.raises(SimulationError, match="without its lane in the member mask"):
        run_f32(body.replace("0xffffffff", "0x0000ffff"))
    with pytest.raises(SimulationError, match="reads a lane outside the member mask"):
        run_f32("setp.lt.u32 %p0, %r0, 16;\n@!%p0 bra DONE;\n" + body.replace("0xffffffff", "0x0000ffff")
                .replace(", 1, ", ", 16, ") + "\nDONE:")


def test_activemask_sees_the_lanes_at_the_instruction():
    body = "setp.lt.u32 %p0, %r0, 5;\n@!%p0 bra DONE;\nactivemask.b32 %r1;\nst.global.u32 [%rd7], %r1;\nDONE:"
    out = run_u32(body)
    assert out[:5].tolist() == [0x1F] * 5 and out[5:].tolist() == [0] * 27


def test_min_pc_reconverges_loops_and_branches():
    # each thread loops tid % 4 times, then all add together
    body = """mov.f32 %f0, 0f00000000;
and.b32 %r1, %r0, 3;
LOOP:
setp.eq.u32 %p0, %r1, 0;
@%p0 bra DONE;
add.f32 %f0, %f0, 0f3F800000;
sub.u32 %r1, %r1, 1;
bra.uni LOOP;
DONE:
shfl.sync.bfly.b32 %f1, %f0, 1, 0x1f, 0xffffffff;
add.f32 %f0, %f0, %f1;
st.global.f32 [%rd7], %f0;"""
    assert run_f32(body)[:4].tolist() == [1, 1, 5, 5]


def test_barriers_must_be_reached_by_every_thread():
    with pytest.raises(SimulationError, match="bar.sync is not reached"):
        run_f32("setp.lt.u32 %p0, %r0, 40;\n@%p0 bra SKIP;\nbar.sync 0;\nSKIP:", threads=64)
    run_f32("bar.sync 0;", threads=64)


def test_shared_memory_and_guards():
    body = """.shared .align 4 .b8 buf[256];
mov.u32 %r1, buf;
mad.lo.u32 %r2, %r0, 4, %r1;
cvt.rn.f32.u32 %f0, %r0;
st.shared.f32 [%r2], %f0;
bar.sync 0;
xor.b32 %r3, %r0, 63;
mad.lo.u32 %r3, %r3, 4, %r1;
setp.ne.u32 %p0, %r0, 0;
mov.f32 %f1, 0fBF800000;
@%p0 ld.shared.f32 %f1, [%r3];
st.global.f32 [%rd7], %f1;"""
    out = run_f32(body, threads=64)
    assert out[0] == -1 and out[1:].tolist() == list(range(62, -1, -1))


def test_memory_errors_are_reported_with_their_line():
    with pytest.raises(SimulationError, match=r"line \d+: st.global.f32 \[%rd7\+2\], %f0;: misaligned"):
        run_f32("mov.f32 %f0, 0f00000000;\nst.global.f32 [%rd7+2], %f0;")
    with pytest.raises(SimulationError, match="past the end of its buffer"):
        run_f32("mov.f32 %f0, 0f00000000;\nst.global.f32 [%rd7+128], %f0;")
    with pytest.raises(SimulationError, match="unsupported instruction tanh.approx.f32"):
        run_f32("tanh.approx.f32 %f0, %f0;")
    with pytest.raises(SimulationError, match="undeclared register %x"):
        run_f32("mov.u32 %x, 1;")


def test_vector_loads_and_packed_halves():
    data = np.arange(128, dtype=np.float32)
    body = """mul.wide.u32 %rd6, %r0, 16;
add.s64 %rd6, %rd1, %rd6;
ld.global.nc.v4.f32 {%f0, %f1, %f2, %f3}, [%rd6];
add.f32 %f0, %f0, %f3;
st.global.f32 [%rd7], %f0;"""
    assert run_f32(body, data=data)[:3].tolist() == [3, 11, 19]
    halves = """mov.b16 %h0, 0x3C00;
mov.b16 %h1, 0x4000;
mov.b32 %r1, {%h0, %h1};
add.f16x2 %r1, %r1, %r1;
mov.b32 {%h2, %h3}, %r1;
cvt.f32.f16 %f0, %h3;
st.global.f32 [%rd7], %f0;"""
    assert run_f32(halves)[0] == 4.0


def test_half_arithmetic_rounds_once():
    # 2048 + 1 is not representable in f16: ties to even give 2048; 2048 + 3 gives 2052
    body = """mov.b16 %h0, 0x6800;
mov.b16 %h1, 0x3C00;
mov.b16 %h2, 0x4200;
add.f16 %h3, %h0, %h1;
add.f16 %h4, %h0, %h2;
cvt.f32.f16 %f0, %h3;
cvt.f32.f16 %f1, %h4;
shl.b32 %r1, %r0, 0;
setp.eq.u32 %p0, %r0, 1;
selp.f32 %f0, %f1, %f0, %p0;
st.global.f32 [%rd7], %f0;"""
    assert run_f32(body)[:2].tolist() == [2048.0, 2052.0]
    # bf16 conversion rounds to nearest even: 1 + 3·2^-9 → 1 + 2^-7
    bf16 = "mov.f32 %f0, 0f3F80C000;\ncvt.rn.bf16.f32 %h0, %f0;\ncvt.f32.bf16 %f1, %h0;\nst.global.f32 [%rd7], %f1;"
    assert run_f32(bf16)[0] == 1.0078125


def test_max_min_nan_rules():
    nan = "0f7FC00000"
    assert run_f32(f"max.f32 %f0, {nan}, 0f3F800000;\nst.global.f32 [%rd7], %f0;")[0] == 1.0
    assert np.isnan(run_f32(f"max.NaN.f32 %f0, {nan}, 0f3F800000;\nst.global.f32 [%rd7], %f0;")[0])
    assert run_f32("min.f32 %f0, 0f40000000, 0f3F800000, 0fC0000000;\nst.global.f32 [%rd7], %f0;")[0] == -2.0
    signed = run_f32("max.f32 %f0, 0f80000000, 0f00000000;\nst.global.f32 [%rd7], %f0;")[0]
    assert signed == 0 and not np.signbit(signed)


def test_packed_f32_pairs_flush_subnormals_with_ftz():
    body = """mov.f32 %f0, 0f00000001;
mov.f32 %f1, 0f3F800000;
mov.b64 %rd5, {%f0, %f1};
add.rn.ftz.f32x2 %rd5, %rd5, %rd5;
mov.b64 {%f2, %f3}, %rd5;
add.f32 %f4, %f0, %f0;
add.f32 %f2, %f2, %f3;
add.f32 %f2, %f2, %f4;
st.global.f32 [%rd7], %f2;"""
    # the subnormal is flushed in the pair (0 + 2) but kept by plain add.f32 (2·2^-149)
    assert run_f32(body)[0] == np.float32(2.0) + np.float32(2 * 2.0**-149)


def test_redux_over_groups_of_lanes():
    body = """and.b32 %r1, %r0, 24;
mov.b32 %r2, 0x000000ff;
shl.b32 %r2, %r2, %r1;
redux.sync.add.s32 %r3, %r0, %r2;
redux.sync.max.u32 %r4, %r0, 0xffffffff;
add.u32 %r3, %r3, %r4;
st.global.u32 [%rd7], %r3;"""
    out = run_u32(body)
    assert out[0] == sum(range(8)) + 31 and out[9] == sum(range(8, 16)) + 31


def test_integer_division_and_signed_shifts():
    body = """mov.u32 %r1, -7;
div.s32 %r2, %r1, 2;
rem.s32 %r3, %r1, 2;
shr.s32 %r4, %r1, 1;
add.u32 %r2, %r2, %r3;
add.u32 %r2, %r2, %r4;
st.global.u32 [%rd7], %r2;"""
    assert np.int32(run_u32(body)[0].view(np.int32)) == -3 - 1 - 4


CLUSTER_KERNEL = HEAD + """.visible .entry k(.param .u64 out)
.reqnctapercluster 4, 1, 1
{
.reg .f32 %f<4>; .reg .b32 %r<12>; .reg .b64 %rd<4>; .reg .pred %p<2>;
.shared .align 4 .b8 slots[16];
ld.param.u64 %rd0, [out];
mov.u32 %r0, %tid.x;
mov.u32 %r1, %cluster_ctarank;
mov.u32 %r2, %clusterid.x;
mov.u32 %r3, %nclusterid.x;
mov.u32 %r4, %ctaid.x;
barrier.cluster.arrive.relaxed.aligned;
barrier.cluster.wait.acquire.aligned;
mov.u32 %r5, slots;
mad.lo.u32 %r6, %r1, 4, %r5;
mapa.shared::cluster.u32 %r7, %r6, 0;
cvt.rn.f32.u32 %f0, %r4;
setp.eq.u32 %p0, %r0, 0;
@%p0 st.shared::cluster.f32 [%r7], %f0;
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
ld.shared.f32 %f1, [%r5];
ld.shared.f32 %f2, [%r5+8];
add.f32 %f1, %f1, %f2;
mad.lo.u32 %r8, %r3, 100, %r2;
cvt.rn.f32.u32 %f3, %r8;
mul.wide.u32 %rd1, %r4, 8;
add.s64 %rd2, %rd0, %rd1;
@%p0 st.global.v2.f32 [%rd2], {%f1, %f3};
ret;
}
"""


def test_clusters_share_rank_0s_shared_memory():
    out = np.zeros((8, 2), np.float32)
    launch(CLUSTER_KERNEL, "k", out, grid=8, block=64, cluster=4)
    # rank 0 holds %ctaid.x of ranks 0 and 2 of its cluster; the other ranks' slots are unwritten
    assert out[:, 0].tolist() == [0 + 2, 0, 0, 0, 4 + 6, 0, 0, 0]
    assert out[:, 1].tolist() == [200, 200, 200, 200, 201, 201, 201, 201]  # nclusterid · 100 + clusterid


@pytest.mark.parametrize(
    "change, launch_cluster, message",
    [
        (None, 2, "requires clusters of 4 CTAs, launched with 2"),
        ("mapa.shared::cluster.u32 %r7, %r6, 0;=mapa.shared::cluster.u32 %r7, %r6, 4;", 4, "rank outside the cluster"),
        ("[%r7]=[%r7+16]", 4, "shared access out of bounds"),
        ("barrier.cluster.arrive.relaxed.aligned;=setp.eq.u32 %p1, %r1, 3;\n@%p1 bra SKIP;\n"
         "barrier.cluster.arrive.relaxed.aligned;\nSKIP:", 4, "barrier.cluster is not reached by every thread of the"),
    ],
)
def test_cluster_errors(change, launch_cluster, message):
    text = CLUSTER_KERNEL
    if change:
        old, new = change.split("=", 1)
        text = text.replace(old, new, 1)
    with pytest.raises(SimulationError, match=message):
        launch(text, "k", np.zeros((8, 2), np.float32), grid=8, block=64, cluster=launch_cluster)
    with pytest.raises(SimulationError, match="not a whole number of clusters"):
        launch(CLUSTER_KERNEL, "k", np.zeros((8, 2), np.float32), grid=6, block=64, cluster=4)


def test_bar_sync_counts_the_threads_of_each_cta_of_a_cluster():
    """A bar.sync that only rank 1 runs is fine; one that half of rank 1 skips is not."""
    text = CLUSTER_KERNEL.replace(".reqnctapercluster 4, 1, 1\n", "").replace(
        "ld.shared.f32 %f1", "setp.eq.u32 %p1, %r1, 1;\n@!%p1 bra.uni SKIP;\nbar.sync 0;\nSKIP:\nld.shared.f32 %f1")
    launch(text, "k", np.zeros((4, 2), np.float32), grid=4, block=64, cluster=2)
    skipping = text.replace("setp.eq.u32 %p1, %r1, 1;", "setp.eq.and.u32 %p1, %r1, 1, %p0;")
    with pytest.raises(SimulationError, match="bar.sync is not reached by every thread of the CTA"):
        launch(skipping, "k", np.zeros((4, 2), np.float32), grid=4, block=64, cluster=2)


# ---- cvt rounding modes, the math the row reduction uses, buffers at odd addresses ----------------
def _convert(instruction: str, source_bits: np.ndarray, out_dtype) -> np.ndarray:
    """Each thread converts its own 32-bit source (a .b32 pattern) with `instruction`
    (``%r1`` or ``%f1`` in, ``%h1``/``%f2``/``%r2`` out) and stores the result."""
    dest = instruction.split()[1].rstrip(",")
    width = {"%h": 16, "%f": 32, "%r": 32}[dest[:2]]
    store = f"st.global.b{width} [%rd5], {dest};" if dest.startswith("%h") else f"st.global.b32 [%rd5], {dest};"
    body = f"""mul.wide.u32 %rd6, %r0, 4;
add.s64 %rd6, %rd1, %rd6;
ld.global.b32 %r1, [%rd6];
mov.b32 %f1, %r1;
{instruction}
mul.wide.u32 %rd5, %r0, {width // 8};
add.s64 %rd5, %rd0, %rd5;
{store}"""
    out = np.zeros(len(source_bits), out_dtype)
    launch(kernel(body, ("out", "data")), "k", out, source_bits.astype(np.uint32), block=len(source_bits))
    return out


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("half", ["f16", "bf16"])
def test_cvt_honours_float_rounding_modes(half, mode):
    from ptxkit.generators.rounding import to_float

    rng = np.random.default_rng(11)
    values = np.concatenate([rng.standard_normal(26) * 3, [1.0 + 2**-9, -(1.0 + 2**-9), 70000.0, -70000.0,
                                                           1e-9, -0.0]]).astype(np.float32)
    got = _convert(f"cvt.{mode}.{half}.f32 %h1, %f1;", values.view(np.uint32), np.uint16)
    as_f32 = (got.astype(np.uint32) << 16).view(np.float32) if half == "bf16" else got.view(np.float16)
    want = to_float(values.astype(np.float64), half, mode)
    np.testing.assert_array_equal(as_f32.astype(np.float64), want.astype(np.float64))


def test_a_wrong_rounding_mode_is_caught_numerically():
    """rn and rz (and rm, rp) differ on most values that are not exact in the target type."""
    values = (np.random.default_rng(3).random(32) * 100).astype(np.float32)
    results = {mode: _convert(f"cvt.{mode}.bf16.f32 %h1, %f1;", values.view(np.uint32), np.uint16)
               for mode in ("rn", "rz", "rm", "rp")}
    assert (results["rn"] != results["rz"]).sum() > 8 and (results["rm"] != results["rp"]).all()
    assert (results["rz"] == results["rm"]).all()  # positive values: toward zero is toward -inf


@pytest.mark.parametrize("mode, expected", [("rni", [2, -2, 0, 2147483647, -2147483648, 3]),
                                            ("rzi", [2, -2, 0, 2147483647, -2147483648, 2]),
                                            ("rmi", [2, -3, 0, 2147483647, -2147483648, 2]),
                                            ("rpi", [3, -2, 0, 2147483647, -2147483648, 3])])
def test_cvt_to_integers_rounds_saturates_and_zeroes_nan(mode, expected):
    values = np.array([2.5, -2.5, np.nan, 3e9, -1e12, 2.75], np.float32)
    got = _convert(f"cvt.{mode}.s32.f32 %r2, %f1;", values.view(np.uint32), np.int32)
    assert got.tolist() == expected
    whole = _convert(f"cvt.{mode}.f32.f32 %f2, %f1;", values[:2].view(np.uint32), np.float32)
    assert whole.tolist() == [float(x) for x in expected[:2]]


def test_integer_to_float_rounds_by_mode():
    big = np.array([2**24 + 1, -(2**24 + 1), 2**24 + 3], np.int64).astype(np.int32).view(np.uint32)
    assert _convert("cvt.rn.f32.s32 %f2, %r1;", big, np.float32).tolist() == [2**24, -(2**24), 2**24 + 4]
    assert _convert("cvt.rp.f32.s32 %f2, %r1;", big, np.float32).tolist() == [2**24 + 2, -(2**24), 2**24 + 4]


def test_float_math_of_the_row_reduction():
    body = """mov.f32 %f0, 0f40400000;
ex2.approx.ftz.f32 %f1, %f0;
lg2.approx.ftz.f32 %f2, %f1;
fma.rn.f32 %f3, %f1, %f2, 0f3F800000;
div.rn.f32 %f4, %f3, 0f40A00000;
neg.f32 %f4, %f4;
abs.f32 %f5, %f4;
testp.finite.f32 %p0, %f5;
selp.f32 %f5, %f5, 0f00000000, %p0;
st.global.f32 [%rd7], %f5;"""
    assert run_f32(body)[0] == 5.0  # 2^3 = 8, lg2 8 = 3, 8·3 + 1 = 25, / 5 = 5
    nan = "0f7FC00000"
    predicates = f"""setp.gtu.f32 %p0, {nan}, 0f3F800000;
setp.ne.f32 %p1, {nan}, 0f3F800000;
setp.num.f32 %p2, 0f3F800000, 0f3F800000;
setp.nan.or.f32 %p3, {nan}, {nan}, %p1;
selp.u32 %r1, 1, 0, %p0;
selp.u32 %r2, 2, 0, %p1;
selp.u32 %r3, 4, 0, %p2;
selp.u32 %r4, 8, 0, %p3;
add.u32 %r1, %r1, %r2;
add.u32 %r1, %r1, %r3;
add.u32 %r1, %r1, %r4;
mul.wide.u32 %rd6, %r0, 4;
add.s64 %rd6, %rd0, %rd6;
st.global.u32 [%rd6], %r1;"""
    assert run_u32(predicates)[0] == 1 + 4 + 8  # unordered > is true, ordered != with NaN is false
    with pytest.raises(SimulationError, match="rounding mode other than .rn"):
        run_f32("add.rz.f32 %f0, %f0, %f0;")


def test_placed_buffers_start_off_alignment_and_keep_their_bounds():
    from ptxkit.generators.simulate import Placed

    data = np.arange(8, dtype=np.float32)
    body = "ld.global.f32 %f0, [%rd1];\nst.global.f32 [%rd7], %f0;"
    assert run_f32(body, data=Placed(data, 4))[0] == 0.0
    with pytest.raises(SimulationError, match="misaligned 16-byte global access"):
        run_f32("ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1];", data=Placed(data, 4))
    with pytest.raises(SimulationError, match="before the start of its buffer"):
        run_f32("ld.global.f32 %f0, [%rd1+-4];", data=Placed(data, 4))
    with pytest.raises(ValueError, match="0 to 255 bytes"):
        Placed(data, 256)


def test_atomics_run_one_thread_at_a_time_in_thread_order():
    """atom returns each thread's old value (the threads go in order), red returns none;
    64-bit and signed min/max, on global and shared memory."""
    counters = np.zeros(4, np.uint64)
    out = np.zeros(64, np.uint32)
    body = ("mov.u32 %r1, 3;\natom.global.add.u32 %r2, [%rd1], %r1;\nst.global.u32 [%rd7], %r2;\n"
            "red.global.add.u64 [%rd1+8], 5;\n"
            "sub.s32 %r3, 40, %r0;\nred.global.min.s32 [%rd1+16], %r3;\n"
            "mov.u32 %r4, shm;\nred.shared.add.u32 [%r4], 1;\nbar.sync 0;\nld.shared.u32 %r5, [%r4];\n"
            "atom.global.exch.b32 %r6, [%rd1+24], %r5;")
    text = kernel(body, ("out", "counters")).replace("{\n.reg", "{\n.shared .align 4 .b32 shm;\n.reg", 1)
    launch(text, "k", out, counters, block=64)
    assert out.tolist() == [3 * t for t in range(64)]
    words = counters.view(np.uint32)
    assert words[0] == 192 and counters[1] == 320 and words[4:6].view(np.int32)[0] == 40 - 63
    assert words[6] == 64  # every thread saw the shared count after the barrier


def test_executions_count_warps_at_each_instruction():
    """A warp counts once per step it spends at an instruction, whatever its lanes; a
    divergent branch runs its sides one after the other."""
    body = "setp.lt.u32 %p0, %r0, 40;\n@%p0 bra LOW;\nst.global.u32 [%rd7], 1;\nbra.uni DONE;\nLOW:\nst.global.u32 [%rd7], 2;\nDONE:"
    executions = {}
    out = np.zeros(64, np.uint32)
    launch(kernel(body), "k", out, block=64, grid=2, executions=executions)
    lines = kernel(body).splitlines()
    at = {text: executions.get(i + 1) for i, text in enumerate(lines)}
    assert at["setp.lt.u32 %p0, %r0, 40;"] == 4
    assert at["st.global.u32 [%rd7], 1;"] == 2 and at["st.global.u32 [%rd7], 2;"] == 4  # warp 1 runs both sides
    assert at["ret;"] == 4 and out.tolist() == [2] * 40 + [1] * 24


def test_clock_globaltimer_and_sm_ids():
    """Time is the launch's step count (CTAs one after another, so later CTAs start
    later); %clock is its low 32 bits; CTA c is on "SM" c % 8; %lanemask_eq is 1 << lane."""
    out = np.zeros((9, 4), np.uint64)
    body = ("mov.u64 %rd2, %globaltimer;\nmov.u32 %r1, %clock;\nmov.u32 %r2, %smid;\nmov.u32 %r3, %lanemask_eq;\n"
            "mov.u32 %r4, %ctaid.x;\nmul.wide.u32 %rd3, %r4, 32;\nadd.s64 %rd3, %rd0, %rd3;\n"
            "setp.eq.u32 %p0, %r0, 5;\n@%p0 st.global.v2.u64 [%rd3], {%rd2, 0};\ncvt.u64.u32 %rd4, %r1;\n"
            "cvt.u64.u32 %rd5, %r2;\ncvt.u64.u32 %rd6, %r3;\n@%p0 st.global.v2.u64 [%rd3+16], {%rd5, %rd6};\n"
            "@%p0 st.global.u64 [%rd3+8], %rd4;")
    launch(kernel(body), "k", out, block=32, grid=9)
    assert out[:, 2].tolist() == [c % 8 for c in range(9)] and out[:, 3].tolist() == [1 << 5] * 9
    assert np.all(np.diff(out[:, 0].astype(np.int64)) > 0) and np.all(out[:, 1] == out[:, 0] + 1)


def test_setp_writes_a_predicate_pair():
    """setp.lt.and.u32 p|q, a, b, c: p = (a < b) and c, q = !(a < b) and c."""
    body = ("setp.lt.u32 %p2, %r0, 16;\nsetp.lt.and.u32 %p0|%p1, %r0, 8, %p2;\nselp.u32 %r1, 1, 0, %p0;\n"
            "selp.u32 %r2, 2, 0, %p1;\nadd.u32 %r1, %r1, %r2;\nst.global.u32 [%rd7], %r1;")
    assert run_u32(body).tolist() == [1] * 8 + [2] * 8 + [0] * 16
