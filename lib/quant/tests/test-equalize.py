#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Channel equalization of `metainfer quantize` (equalize() in quantize.c).

A seeded net whose channels differ in spread by up to 100x: a stem conv +
Relu + MaxPool, a residual pair (1x1 conv, Add, Relu) that joins the
stem's channels to one group, a Clip(0, 6) branch (which must stay
unscaled), GlobalAveragePool, Flatten and Gemm.
  - the rewritten fp32 model (--all-fp32: every unit fp32) computes
    the same outputs as the original, while its weights did change where
    the graph allows (two groups: the stem's channels, and c4 -> c5) and
    not through the Clip;
  - all int8, the equalized file is closer to fp32 than --no-equalize.
"""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qtest import MI, check, failures, run  # noqa: E402

N = 8  # images per run


def build(path):
    rng = np.random.default_rng(5)

    def conv_w(o, i, k, spread=True):
        w = rng.normal(0, (2.0 / (i * k * k)) ** 0.5, (o, i, k, k))
        if spread:  # output channels 100x apart in spread
            w *= np.logspace(-1, 1, o)[rng.permutation(o), None, None, None]
        return w.astype(np.float32)

    inits = {
        "w1": conv_w(16, 3, 3), "b1": rng.normal(0, 0.1, 16).astype(np.float32),
        "w2": conv_w(16, 16, 1), "b2": rng.normal(0, 0.1, 16).astype(np.float32),
        "w3": conv_w(16, 16, 3, False),
        "w4": conv_w(16, 16, 1), "w5": conv_w(16, 16, 1, False),
        "wf": rng.normal(0, 0.25, (10, 16)).astype(np.float32),
        "bf": rng.normal(0, 0.1, 10).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"]),
        helper.make_node("Add", ["p1", "c2"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1] * 4),
        helper.make_node("Clip", ["c3", "lo", "hi"], ["k3"]),
        helper.make_node("Conv", ["k3", "w4"], ["c4"]),
        helper.make_node("Conv", ["c4", "w5"], ["c5"]),
        helper.make_node("Add", ["c5", "r2"], ["a2"]),
        helper.make_node("GlobalAveragePool", ["a2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    tensors += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                numpy_helper.from_array(np.array(6, np.float32), "hi")]
    graph = helper.make_graph(
        nodes, "eq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, 10])], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def outputs(model, xs, tmp):
    ys = []
    for i, x in enumerate(xs):
        inp, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        np.save(inp, x)
        run([MI, "run", model, "-q", "-t", "1", "--input", inp, "--output", out])
        ys.append(np.load(out).astype(np.float64))
    return ys


def err(ref, ys):
    """mean over images of 1 - cosine"""
    e = []
    for a, b in zip(ref, ys):
        for i in range(a.shape[0]):
            e.append(1 - a[i] @ b[i] / (np.linalg.norm(a[i]) * np.linalg.norm(b[i])))
    return float(np.mean(e))


def weights(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def main():
    tmp = tempfile.mkdtemp(prefix="mi-eq-")
    fp32 = os.path.join(tmp, "eq.onnx")
    build(fp32)
    rng = np.random.default_rng(9)
    xs = [rng.uniform(-1, 1, (N, 3, 16, 16)).astype(np.float32) for _ in range(4)]
    ref = outputs(fp32, xs, tmp)

    eqf = os.path.join(tmp, "eq-fp32.onnx")
    r = run([MI, "quantize", fp32, "--calib-random", "8", "--all-fp32", "-o", eqf])
    check("equalized the channels of 2 tensor groups" in r.stdout,
          "two channel groups found (stem + residual, c4 -> c5), none through the Clip")
    w0, w1 = weights(fp32), weights(eqf)
    moved = [k for k in ("w1", "b1", "w2", "b2", "w3", "w4", "w5", "wf")
             if k in w1 and not np.allclose(w0[k], w1[k], rtol=1e-3)]
    check(len(moved) == 8, "the groups' weights were rescaled (%s)" % moved)
    # Clip(c3): neither c3's output channels (w3's rows) nor k3's (w4's
    # columns) may be scaled: the ratios vary along one axis only
    r3 = w1["w3"] / w0["w3"]
    r4 = w1["w4"] / w0["w4"]
    check(np.allclose(r3, r3[:1], rtol=1e-5) and np.allclose(r4, r4[:, :1], rtol=1e-5),
          "nothing scaled through the Clip")
    d = max(np.abs(a - b).max() / np.abs(a).max() for a, b in zip(ref, outputs(eqf, xs, tmp)))
    check(d < 1e-5, "equalized fp32 model = original (max rel diff %.2e)" % d)

    # (8-bit weights: the activations' error is what equalization lowers;
    # the AVX2 hosts' default of 7-bit dense weights adds weight error)
    errs = {}
    for name, opt in (("equalized", []), ("plain", ["--no-equalize"])):
        q = os.path.join(tmp, name + ".onnx")
        run([MI, "quantize", fp32, "--calib-random", "8", "--weight-bits", "8", "-o", q] + opt)
        errs[name] = err(ref, outputs(q, xs, tmp))
    check(errs["equalized"] < 0.7 * errs["plain"],
          "all int8: 1 - cosine %.3e equalized < 0.7 x %.3e plain" %
          (errs["equalized"], errs["plain"]))
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("test-equalize: all checks passed")


if __name__ == "__main__":
    main()
