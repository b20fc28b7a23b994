#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The residual Add (+ Relu / Clip) fused into an int8 conv with fp32
output blocked for the NCHWc kernels (mi_quant_conv_add, MI_QUANT_RESADD).

Small mixed QDQ graphs (ResNet's bottleneck in a --min-cosine file):
fp32 conv -> Relu (blocked) -> Q -> DQ -> int8 1x1 conv writing fp32 ->
Add with that blocked Relu output (either operand order) -> act -> fp32
1x1 conv -> Q -> int8 conv -> DQ.  Channel counts that are / are not
multiples of the block (pad lanes), pixel counts that are not a multiple
of the 4-pixel transposes, batch 2.  A graph whose int8 conv output has a
second reader must not fuse.

Scales are powers of two and weights small multiples of them, so every
fp32 sum is exact: the fast run must equal --reference bit for bit on
every ISA path (MI_CPU_ISA=generic|avx2|avx512: blocks of 4 (the planar
fallback), 8 (the tile epilogues), 16), at 1 thread and split over 3
(MI_QUANT_SPLIT_ALL=1), and equal MI_QUANT_RESADD=0 (the NCHWc Add),
MI_QUANT_BLKEPI=0 (the fallback's transposition adds it) and
MI_QUANT_RESAVX=0 (SSE).  ~2 s.
"""
import os
import shutil
import sys
import tempfile

import numpy as np

from qtest import MI, check, failures, run  # noqa: E402


def build(path, c0, c1, hw, act, first, twice, rng):
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    sc = np.float32(0.125)

    def const(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def q(x, name):
        nodes.append(helper.make_node("QuantizeLinear", [x, const(name + "_s", sc),
                                                         const(name + "_z", np.array(128, np.uint8))],
                                      [name + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"],
                                      [name + "_dq"]))
        return name + "_dq"

    def conv8(x, name, cin, cout, k):
        w = rng.integers(-127, 128, (cout, cin, k, k)).astype(np.int8)
        w.reshape(cout, -1)[:, 0] = 127
        ws = np.where(np.arange(cout) % 2, 2.0 ** -9, 2.0 ** -10).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear", [const(name + "_w", w),
                                                           const(name + "_ws", ws),
                                                           const(name + "_wz",
                                                                 np.zeros(cout, np.int8))],
                                      [name + "_wdq"], axis=0))
        nodes.append(helper.make_node("Conv", [x, name + "_wdq"], [name + "_y"],
                                      pads=[k // 2] * 4))
        return name + "_y"

    def conv32(x, name, cin, cout, k):
        w = (rng.integers(-4, 5, (cout, cin, k, k)) / 8).astype(np.float32)
        b = (rng.integers(-8, 9, cout) / 8).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, const(name + "_w", w), const(name + "_b", b)],
                                      [name + "_y"], pads=[k // 2] * 4))
        return name + "_y"

    x = q("x", "in")
    f = conv32(conv8(x, "a", c0, c1, 3), "f", c1, c1, 3)
    nodes.append(helper.make_node("Relu", [f], ["f_r"]))
    b = conv8(q("f_r", "qf"), "b", c1, c1, 1)
    nodes.append(helper.make_node("Add", ["f_r", b] if first else [b, "f_r"], ["res"]))
    r = "res"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["res"], ["res_a"]))
        r = "res_a"
    elif act == "clip":
        nodes.append(helper.make_node("Clip", ["res", const("lo", np.float32(-0.5)),
                                               const("hi", np.float32(6.0))], ["res_a"]))
        r = "res_a"
    g = conv32(r, "g", c1, c1, 1)
    if twice:  # the int8 conv's output has a second reader: no fusion
        nodes.append(helper.make_node("Add", [g, b], ["g2"]))
        g = "g2"
    y = q(conv8(q(g, "qg"), "c", c1, c1, 1), "qc")
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    h, w = hw
    gr = helper.make_graph(nodes, "resadd",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c0, h, w])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c1, h, w])],
                           inits)
    import onnx
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def mi_run(model, x, tmp, env=None, threads=1, extra=()):
    inp, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "o.npy")
    np.save(inp, x)
    r = run([MI, "run", model, "--input", inp, "--output", out, "--threads", str(threads),
             *extra], env)
    return np.load(out), r.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="mi-qresadd-")
    rng = np.random.default_rng(7)
    cases = [  # c0, c1, (h, w), act after the Add, the conv is the Add's 2nd operand, 2 readers
        (4, 16, (9, 11), "relu", False, False),
        (3, 20, (13, 7), "none", True, False),   # pad lanes, 3-pixel tail
        (4, 24, (6, 6), "clip", False, False),
        (4, 12, (10, 10), "relu", True, False),
        (4, 16, (7, 9), "relu", False, True),    # not fused
    ]
    for i, (c0, c1, hw, act, first, twice) in enumerate(cases):
        path = os.path.join(tmp, "m%d.onnx" % i)
        build(path, c0, c1, hw, act, first, twice, rng)
        x = (rng.integers(-100, 100, (2, c0) + hw) / 8).astype(np.float32)
        ref, _ = mi_run(path, x, tmp, extra=("--reference",))
        tag = "case %d (c %d/%d, %dx%d, %s%s%s)" % (i, c0, c1, hw[0], hw[1], act,
                                                ", conv 2nd" if first else "",
                                                ", 2 readers" if twice else "")
        check(np.abs(ref).max() > 1 and len(np.unique(ref)) > 20, tag + ": reference output not trivial")
        for isa in ("generic", "avx2", "avx512"):
            for t, env in ((1, {}), (3, {"MI_QUANT_SPLIT_ALL": "1"})):
                env = dict(env, MI_CPU_ISA=isa, MI_QUANT_VERBOSE="1")
                got, err = mi_run(path, x, tmp, env, threads=t)
                what = "%s %s t%d" % (tag, isa, t)
                nf = err.count("fused")
                check(nf == (0 if twice else 1), what + ": %d Add fused" % nf)
                check(np.array_equal(got, ref), what + ": == --reference")
                for sw in ("MI_QUANT_RESADD", "MI_QUANT_BLKEPI", "MI_QUANT_RESAVX"):
                    o, _ = mi_run(path, x, tmp, dict(env, **{sw: "0"}), threads=t)
                    check(np.array_equal(got, o), what + ": == %s=0" % sw)
    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d FAILED" % len(failures))
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
