#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Small QDQ models for test-place: chains of quantized Relu units (what
the test lowering puts on emulated accelerators) with a CPU-only Sigmoid
between them, so that placement has to split jobs.

  gen_place_models.py OUTDIR
"""
import os
import sys

from onnx import TensorProto, helper, save


def qdq_model(path, pattern):
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.05])
    zp = helper.make_tensor("zp", TensorProto.UINT8, [], [128])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q0"],
                              name="q_in")]
    cur = "q0"
    for i, op in enumerate(pattern):
        d, a, q = "d%d" % i, "a%d" % i, "q%d" % (i + 1)
        nodes.append(helper.make_node("DequantizeLinear", [cur, "s", "zp"],
                                      [d], name="dq%d" % i))
        nodes.append(helper.make_node(op, [d], [a], name="%s%d" %
                                      (op.lower(), i)))
        nodes.append(helper.make_node("QuantizeLinear", [a, "s", "zp"],
                                      [q], name="q%d" % i))
        cur = q
    nodes.append(helper.make_node("DequantizeLinear", [cur, "s", "zp"],
                                  ["y"], name="dq_out"))
    g = helper.make_graph(
        nodes, "place",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [scale, zp])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    save(m, path)


def branch_model(path):
    """A Relu unit in parallel with a CPU Sigmoid, joined by an Add: the
    job's wait comes after the CPU branch ran."""
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.05])
    zp = helper.make_tensor("zp", TensorProto.UINT8, [], [128])
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "s", "zp"], ["q0"], name="q_in"),
        n("DequantizeLinear", ["q0", "s", "zp"], ["d0"], name="dq0"),
        n("Relu", ["d0"], ["a0"], name="relu0"),
        n("QuantizeLinear", ["a0", "s", "zp"], ["q1"], name="q1"),
        n("Sigmoid", ["x"], ["b0"], name="sigmoid"),
        n("Mul", ["b0", "b0"], ["b1"], name="mul"),
        n("DequantizeLinear", ["q1", "s", "zp"], ["d1"], name="dq1"),
        n("Add", ["d1", "b1"], ["y"], name="add"),
    ]
    g = helper.make_graph(
        nodes, "branch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [scale, zp])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
         path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    qdq_model(os.path.join(out, "relu3.onnx"), ["Relu"] * 3)
    qdq_model(os.path.join(out, "split.onnx"),
              ["Relu", "Relu", "Sigmoid", "Relu"])
    branch_model(os.path.join(out, "branch.onnx"))


if __name__ == "__main__":
    main()
