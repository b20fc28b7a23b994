#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Standalone QuantizeLinear / DequantizeLinear at fp32 / int8 boundaries.

Small mixed QDQ graphs (the shape of `metainfer quantize --min-cosine`
files): int8 conv -> DQ -> fp32 conv (depthwise, stride 1/2, Relu) -> Q ->
int8 conv -> DQ -> fp32 1x1 conv + residual Add of its own input -> Q ->
int8 conv, with channel counts that are / are not multiples of 4 and of
the fp32 block, maps whose pixel count is not a multiple of the Q/DQ
kernels' pixel chunk, batch 2, and a float-output int8 table
(x * HardSigmoid(x)) in place of the first DQ in two of them, or no Q/DQ
after the first int8 conv in three (it writes fp32, blocked for the fp32
conv).  The standalone Q/DQ then read / write the int8 convs' C4 layout
and the NCHWc kernels' blocked layout (checked on the MI_DEBUG=quant
lines).

Scales are powers of two and weights small multiples of them, so every
fp32 sum is exact whatever the kernel's order: the fast run must equal
--reference (the reference ops, planar) bit for bit on every ISA path
(--isa generic|avx2|avx512: blocks of 4, 8, 16 floats), at 1 and 3
threads.  Then fp32 islands that end in a QuantizeLinear of an fp32 conv
(build_fq): into an int8 depthwise conv, or into a DQ read by an fp32
depthwise conv; the Q writes C4 from blocked floats on AVX2 and the
output equals --reference.  Last, an int8 conv whose output only DQs for
ReduceMean / Gemm read (check_dqpl).  ~2 s.
"""
import os
import shutil
import tempfile

import numpy as np

from qtest import QdqGraph, check, finish, mi_run  # noqa: E402


def build(path, c0, c1, c2, hw, stride, dw, lut, rng, f32out=False):
    """The mixed graph; activations uint8 (zp 128) and int8 (zp 0) in turn.
    f32out: the first int8 conv writes fp32 (no QuantizeLinear after it)."""
    gb = QdqGraph(rng)
    u8 = [True]

    def q(x, name):
        u8[0] = not u8[0]
        return gb.q(x, name, not u8[0])

    x = q("x", "in")
    a = gb.conv8(x, "a", c0, c1, 3) if f32out else q(gb.conv8(x, "a", c0, c1, 3), "qa")
    if lut:  # x * HardSigmoid(x) on an int8 tensor: a float-output table
        gb.node("HardSigmoid", [a], ["hs"], alpha=0.25, beta=0.5)
        gb.node("Mul", [a, "hs"], ["hsw"])
        a = "hsw"
    if dw:
        f = gb.conv32(a, "f", c1, c1, 3, stride, group=c1)
    else:
        f = gb.conv32(a, "f", c1, c1, 3, stride)
    gb.node("Relu", [f], ["f_r"])
    b = q(gb.conv8(q("f_r", "qf"), "b", c1, c2, 1), "qb")
    g = gb.conv32(b, "g", c2, c2, 1)
    gb.node("Add", [g, b], ["res"])
    y = q(gb.conv8(q("res", "qr"), "c", c2, c2, 1), "qc")
    h, w = hw
    oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
    gb.save(path, "mixed", [2, c0, h, w], y, [2, c2, oh, ow])


def build_fq(path, c0, c1, c2, hw, stride, int8dw, rng):
    """An fp32 island ending in a QuantizeLinear that writes C4 from
    blocked floats: fp32 3x3 conv -> Relu -> Q -> int8
    depthwise 3x3 (int8dw) or DQ -> fp32 depthwise 3x3 -> Relu (a Q read
    only by a DQ whose reader is an fp32 conv) -> Q -> DQ -> fp32 1x1 conv
    -> Relu -> Q -> int8 1x1 conv."""
    gb = QdqGraph(rng)
    a = gb.relu(gb.conv32("x", "p", c0, c1, 3))
    if int8dw:
        d = gb.conv8(gb.q(a, "qp"), "d", c1, c1, 3, stride, group=c1)
    else:
        d = gb.relu(gb.conv32(gb.q(a, "qp", False), "d", c1, c1, 3, stride, group=c1))
    g = gb.relu(gb.conv32(gb.q(d, "qd"), "g", c1, c2, 1))
    y = gb.q(gb.conv8(gb.q(g, "qg", False), "c", c2, c2, 1), "qc")
    h, w = hw
    oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
    gb.save(path, "fq", [2, c0, h, w], y, [2, c2, oh, ow])


def check_fq(tmp, rng):
    """build_fq's graphs: equal to --reference on every ISA; the Q after the fp32 conv writes C4 from blocked floats
    (on AVX2, where the depthwise quad kernel reads C4, and for the Q read
    by a DQ alone)."""
    cases = [  # c0, c1, c2, (h, w), stride, int8 depthwise
        (3, 16, 12, (13, 11), 1, True),   # blocks of 8 and 16, odd map
        (4, 12, 8, (9, 17), 2, True),     # pad lanes of a 16 block, stride 2
        (3, 20, 8, (7, 7), 1, False),     # Q -> DQ -> fp32 depthwise
        (4, 24, 16, (10, 12), 2, False),
    ]
    for i, (c0, c1, c2, hw, s, i8) in enumerate(cases):
        path = os.path.join(tmp, "fq%d.onnx" % i)
        build_fq(path, c0, c1, c2, hw, s, i8, rng)
        x = (rng.integers(-100, 100, (2, c0) + hw) / 8).astype(np.float32)
        ref, _ = mi_run(path, x, tmp, extra=("--reference",))
        tag = "fq case %d (c %d/%d/%d, %dx%d, stride %d, %s depthwise)" % (
            i, c0, c1, c2, hw[0], hw[1], s, "int8" if i8 else "fp32")
        check(np.abs(ref).max() > 1 and len(np.unique(ref)) > 20, tag + ": reference output not trivial")
        for isa in ("generic", "avx2", "avx512"):
            for t, env in ((1, {}), (3, {})):
                env = dict(env, ISA=isa, MI_DEBUG="quant")
                got, err = mi_run(path, x, tmp, env, threads=t)
                lines = [ln for ln in err.splitlines() if "'qp" in ln or ("QuantizeLinear" in ln and "blocked" in ln)]
                c4 = any("blocked" in ln and "C4" in ln for ln in lines)
                what = "%s %s t%d" % (tag, isa, t)
                # a layout choice of the AVX2 planner (AVX-512's 16-channel
                # blocks may leave a map planar: the outputs are checked)
                if isa == "avx2":
                    check(c4,
                          what + ": the fp32 conv's Q writes C4 from blocked floats")
                check(np.array_equal(got, ref), what + ": == --reference")
                if not np.array_equal(got, ref):
                    print("   max diff", np.abs(got - ref).max())


def check_dqpl(tmp, rng):
    """An int8 conv -> Q -> DQ -> ReduceMean (-> Flatten -> Gemm), as
    ShuffleNetV2's conv5: the conv's bytes stay planar for the DQ unless
    the DQ's floats also go to an fp32 conv (the NCHWc pass's); equal to
    --reference."""
    from onnx import TensorProto, helper, numpy_helper
    import onnx

    # the Gemm case: 128 pixels, a mean the Gemm sums exactly in any order
    for c1, hw, gemm, conv in ((16, (7, 7), False, False), (32, (8, 16), True, False),
                               (12, (8, 8), False, True)):
        nodes, inits = [], []

        def const(name, arr):
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
            return name

        def q(x, name):
            nodes.append(helper.make_node("QuantizeLinear", [x, const(name + "_s", np.float32(0.125)),
                                                             const(name + "_z", np.array(128, np.uint8))],
                                          [name + "_q"]))
            nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"],
                                          [name + "_dq"]))
            return name + "_dq"

        w = rng.integers(-127, 128, (c1, 4, 3, 3)).astype(np.int8)
        w.reshape(c1, -1)[:, 0] = 127
        ws = np.where(np.arange(c1) % 2, 2.0 ** -9, 2.0 ** -10).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear", [const("w", w), const("ws", ws),
                                                           const("wz", np.zeros(c1, np.int8))],
                                      ["wdq"], axis=0))
        nodes.append(helper.make_node("Conv", [q("x", "qx"), "wdq"], ["cy"], pads=[1] * 4))
        nodes.append(helper.make_node("Relu", ["cy"], ["cr"]))
        d = q("cr", "qc")
        nodes.append(helper.make_node("ReduceMean", [d], ["m"], axes=[2, 3], keepdims=1))
        outs = [helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, c1, 1, 1])]
        if gemm:
            nodes.append(helper.make_node("Flatten", ["m"], ["f"], axis=1))
            nodes.append(helper.make_node("Gemm", ["f", const("gw", (rng.integers(-4, 5, (5, c1)) / 8).astype(np.float32))],
                                          ["y"], transB=1))
            outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])]
        if conv:  # an fp32 conv also reads the DQ's floats: C4 stays
            nodes.append(helper.make_node("Conv", [d, const("fw", (rng.integers(-4, 5, (4, c1, 1, 1)) / 8).astype(np.float32))],
                                          ["fy"]))
            nodes.append(helper.make_node("ReduceMean", ["fy"], ["fm"], axes=[1, 2, 3], keepdims=1))
            nodes.append(helper.make_node("Add", ["m", "fm"], ["y"]))
            outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c1, 1, 1])]
        gr = helper.make_graph(nodes, "dqpl",
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4] + list(hw))],
                               outs, inits)
        m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(m)
        path = os.path.join(tmp, "dqpl.onnx")
        onnx.save(m, path)
        x = (rng.integers(-100, 100, (2, 4) + hw) / 8).astype(np.float32)
        ref, _ = mi_run(path, x, tmp, extra=("--reference",))
        tag = "conv -> DQ -> ReduceMean%s%s (c %d, %dx%d)" % (" -> Gemm" if gemm else "",
                                                            " + fp32 conv" if conv else "", c1, *hw)
        check(np.abs(ref).max() > 0.5 and len(np.unique(ref)) > 4, tag + ": reference output not trivial")
        for isa in ("generic", "avx2"):
            for t, env in ((1, {}), (3, {})):
                env = dict(env, ISA=isa, MI_DEBUG="quant")
                got, err = mi_run(path, x, tmp, env, threads=t)
                n1 = [ln.split()[2] for ln in err.splitlines() if "in C4 layout" in ln]
                what = "%s %s t%d" % (tag, isa, t)
                check(len(n1) == 1, what + ": planned (C4 tensors %s)" % n1)
                check(np.array_equal(got, ref), what + ": == --reference")
                if not np.array_equal(got, ref):
                    print("   max diff", np.abs(got - ref).max())


def main():
    tmp = tempfile.mkdtemp(prefix="mi-qdqlay-")
    rng = np.random.default_rng(5)
    cases = [  # c0, c1, c2, (h, w), stride, depthwise, table before the fp32 conv, int8 conv -> fp32
        (4, 12, 20, (37, 31), 1, True, False, False),   # C4 + blocked with pad lanes
        (3, 40, 8, (9, 17), 2, True, True, False),      # stride 2, blocks of 16 + 8 lanes
        (4, 14, 10, (23, 29), 1, False, True, False),   # channels not multiples of 4
        (4, 16, 36, (7, 21), 2, False, False, False),   # dense 3x3 stride 2
        # an int8 conv writing fp32 blocked into the fp32 conv
        (4, 13, 12, (11, 19), 2, True, False, True),    # pad lanes, 4-pixel tail
        (3, 40, 8, (60, 62), 1, True, False, True),     # > 128K floats, depthwise reader
        (4, 24, 16, (9, 9), 1, False, False, True),     # dense 3x3 reader
        (4, 320, 8, (11, 11), 1, True, False, True),    # wide: split ranges under 64 px
    ]
    for i, (c0, c1, c2, hw, s, dw, lut, f32out) in enumerate(cases):
        path = os.path.join(tmp, "m%d.onnx" % i)
        build(path, c0, c1, c2, hw, s, dw, lut, rng, f32out)
        x = (rng.integers(-100, 100, (2, c0) + hw) / 8).astype(np.float32)
        ref, _ = mi_run(path, x, tmp, extra=("--reference",))
        tag = "case %d (c %d/%d/%d, %dx%d, stride %d, %s%s%s)" % (
            i, c0, c1, c2, hw[0], hw[1], s, "depthwise" if dw else "dense", ", table" if lut else "",
            ", int8 conv -> fp32" if f32out else "")
        check(np.abs(ref).max() > 1 and len(np.unique(ref)) > 20, tag + ": reference output not trivial")
        for isa in ("generic", "avx2", "avx512"):
            for t, env in ((1, {}), (3, {})):
                env = dict(env, ISA=isa, MI_DEBUG="quant")
                got, err = mi_run(path, x, tmp, env, threads=t)
                nblk = err.count("fp32 side blocked")
                nlut = err.count("HardSigmoid '") if lut else 1
                nc4 = err.count("quantized side C4")
                nconv = err.count("fp32 output blocked")
                what = "%s %s t%d: %d Q/DQ blocked (%d C4), %d conv" % (tag, isa, t, nblk, nc4, nconv)
                check(nblk >= (1 if c1 % 4 or f32out else 2) and nlut == 1 and
                      (c1 % 4 or nc4 >= (1 if f32out else 2)) and nconv == f32out,
                      what + ": layouts used")
                check(np.array_equal(got, ref), what + ": == --reference")
                if not np.array_equal(got, ref):
                    print("   max diff", np.abs(got - ref).max())
    check_fq(tmp, rng)
    check_dqpl(tmp, rng)
    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
