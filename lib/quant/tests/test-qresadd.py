#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The residual Add (+ Relu / Clip) fused into an int8 conv with fp32
output blocked for the NCHWc kernels (the node's lops->take_add).

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
fallback), 8 (the tile epilogues), 16), at 1 and 3 threads.  ~1 s.
"""
import os
import shutil
import tempfile

import numpy as np

from qtest import QdqGraph, check, finish, mi_run  # noqa: E402


def build(path, c0, c1, hw, act, first, twice, rng):
    gb = QdqGraph(rng)
    x = gb.q("x", "in")
    f = gb.conv32(gb.conv8(x, "a", c0, c1, 3), "f", c1, c1, 3)
    gb.node("Relu", [f], ["f_r"])
    b = gb.conv8(gb.q("f_r", "qf"), "b", c1, c1, 1)
    gb.node("Add", ["f_r", b] if first else [b, "f_r"], ["res"])
    r = "res"
    if act == "relu":
        gb.node("Relu", ["res"], ["res_a"])
        r = "res_a"
    elif act == "clip":
        gb.node("Clip", ["res", gb.const("lo", np.float32(-0.5)), gb.const("hi", np.float32(6.0))],
                ["res_a"])
        r = "res_a"
    g = gb.conv32(r, "g", c1, c1, 1)
    if twice:  # the int8 conv's output has a second reader: no fusion
        gb.node("Add", [g, b], ["g2"])
        g = "g2"
    y = gb.q(gb.conv8(gb.q(g, "qg"), "c", c1, c1, 1), "qc")
    h, w = hw
    gb.save(path, "resadd", [2, c0, h, w], y, [2, c1, h, w])


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
            for t, env in ((1, {}), (3, {})):
                env = dict(env, MI_CPU_ISA=isa, MI_DEBUG="quant")
                got, err = mi_run(path, x, tmp, env, threads=t)
                what = "%s %s t%d" % (tag, isa, t)
                nf = err.count("fused")
                check(nf == (0 if twice else 1), what + ": %d Add fused" % nf)
                check(np.array_equal(got, ref), what + ": == --reference")
    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
