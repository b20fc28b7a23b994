#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""How the int8 nodes split over threads does not change a byte.

A small fp32 net in the shape of the mobile CNNs' inverted residual
blocks on 14x14 and 28x28 maps (1x1 expansion -> Relu or HardSwish ->
depthwise 3x3 -> 1x1 projection (+ residual)), quantized by `metainfer
quantize`, batch 2.  On 14x14 maps a 1x1 expansion read only by a
depthwise conv (directly or through the HardSwish byte table) splits its
output channels over the threads (MI_QCONV_CHAN, "convs split by output
channels" on the MI_DEBUG=quant line; on AVX2 the C4 depthwise kernel
reads C4 instead, no channel split); on 28x28 maps the dense convs split
in pixel panels from 512K multiply-adds.  Outputs at 2 and 3 threads on
every ISA path must equal the 1-thread run bit for bit.  ~1 s.
"""
import os
import re
import shutil
import sys
import tempfile

import numpy as np

from qtest import MI, check, failures, run  # noqa: E402


def build(path, rng):
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    n = [0]

    def conv(x, cin, cout, k, group=1, act=None):
        n[0] += 1
        name = "c%d" % n[0]
        w = (rng.standard_normal((cout, cin // group, k, k)) * (2.0 / (cin // group * k * k)) ** 0.5)
        inits.append(numpy_helper.from_array(w.astype(np.float32), name + "_w"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32),
                                             name + "_b"))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], group=group,
                                      kernel_shape=[k, k], pads=[k // 2] * 4))
        if act:
            nodes.append(helper.make_node(act, [name], [name + "_a"]))
            return name + "_a"
        return name

    def block(x, c, e, act, residual):
        y = conv(x, c, e, 1, act=act)
        y = conv(y, e, e, 3, group=e, act="Relu")
        y = conv(y, e, c, 1)
        if residual:
            n[0] += 1
            nodes.append(helper.make_node("Add", [x, y], ["add%d" % n[0]]))
            return "add%d" % n[0]
        return y

    x = conv("x", 3, 16, 3, act="Relu")                         # 28x28
    x = block(x, 16, 48, "Relu", True)                          # dense 1x1 on 28x28
    n[0] += 1
    nodes.append(helper.make_node("MaxPool", [x], ["mp"], kernel_shape=[2, 2], strides=[2, 2]))
    x = block("mp", 16, 64, "Relu", True)                       # 14x14: expansion -> dw
    x = block(x, 16, 72, "HardSwish", True)                     # through the byte table
    x = block(x, 16, 56, "Relu", False)
    g = helper.make_graph(nodes, "qsplit",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 28, 28])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 16, 14, 14])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    open(path, "wb").write(m.SerializeToString())


def mi_run(model, inp, tmp, env, threads):
    out = os.path.join(tmp, "o.npy")
    r = run([MI, "run", model, "--input", inp, "--output", out, "--threads", str(threads)],
            dict(env, MI_DEBUG="quant"))
    return open(out, "rb").read(), r.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="mi-qsplit-")
    rng = np.random.default_rng(7)
    fp, q8 = os.path.join(tmp, "net.onnx"), os.path.join(tmp, "net.int8.onnx")
    build(fp, rng)
    run([MI, "quantize", fp, "--calib-random", "4", "-o", q8])
    inp = os.path.join(tmp, "x.npy")
    np.save(inp, rng.uniform(-1, 1, (2, 3, 28, 28)).astype(np.float32))
    for isa in ("avx512", "avx2", "generic"):
        env = {"MI_CPU_ISA": isa}
        ref, _ = mi_run(q8, inp, tmp, env, 1)
        for t in (2, 3):
            out, err = mi_run(q8, inp, tmp, env, t)
            check(out == ref, "%s %d threads == 1 thread" % (isa, t))
            # the channel split needs a planar depthwise reader: on AVX2
            # the C4 quad kernel reads C4 and takes its place
            if isa == "avx2":
                continue
            m = re.search(r"(\d+) convs split by output channels", err)
            nchan = int(m.group(1)) if m else 0
            check(nchan == 3, "%s %d threads: %d convs split by output channels (want 3)"
                  % (isa, t, nchan))
    shutil.rmtree(tmp)
    if failures:
        print("%d FAILED" % len(failures))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
