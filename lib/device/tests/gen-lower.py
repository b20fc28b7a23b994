#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Seeded QDQ test models for check-lower (lib/device/tests/test-lower.c).

Every lowered op form, on random shapes and quantization parameters: each
model reads uint8/int8 graph inputs, dequantizes them, runs one float op
(with weights as int8 initializers behind DequantizeLinear, a fused
Relu/Clip) and quantizes the result: one quantized unit per model.  Also
two small fp32 networks for `metainfer quantize` (a CNN and a
Transformer-like MatMul/Add/Gemm block).

    gen-lower.py --out DIR [--seed S] [--count N]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class B:
    """One QDQ model under construction."""

    def __init__(self, rng, name):
        self.rng = rng
        self.name = name
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.n = 0

    def uniq(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, arr, p="c"):
        nm = self.uniq(p)
        self.inits.append(numpy_helper.from_array(arr, nm))
        return nm

    def qparams(self, dt):
        s = float(self.rng.uniform(0.005, 0.08))
        zp = int(self.rng.randint(0, 256)) if dt == np.uint8 else int(self.rng.randint(-30, 31))
        return s, zp

    def qinput(self, shape, dt=None):
        """A quantized graph input and its DQ output (float)."""
        dt = dt or (np.uint8 if self.rng.rand() < 0.5 else np.int8)
        nm = self.uniq("x")
        tp = TensorProto.UINT8 if dt == np.uint8 else TensorProto.INT8
        self.inputs.append(helper.make_tensor_value_info(nm, tp, list(shape)))
        s, zp = self.qparams(dt)
        return self.dq(nm, s, zp, dt), (s, zp, dt)

    def dq(self, q, s, zp, dt):
        out = self.uniq("f")
        self.nodes.append(helper.make_node(
            "DequantizeLinear", [q, self.const(np.array(s, np.float32), "s"),
                                 self.const(np.array(zp, dt), "z")], [out]))
        return out

    def qoutput(self, f, dt=None, params=None):
        dt = dt or (np.uint8 if self.rng.rand() < 0.5 else np.int8)
        s, zp = params or self.qparams(dt)
        nm = self.uniq("y")
        self.nodes.append(helper.make_node(
            "QuantizeLinear", [f, self.const(np.array(s, np.float32), "s"),
                               self.const(np.array(zp, dt), "z")], [nm]))
        tp = TensorProto.UINT8 if dt == np.uint8 else TensorProto.INT8
        self.outputs.append(helper.make_tensor_value_info(nm, tp, None))
        return nm

    def weights(self, shape, per_channel, axis=0):
        w = self.rng.randint(-127, 128, size=shape).astype(np.int8)
        noc = shape[axis]
        # symmetric quantization: every channel (per tensor: the tensor)
        # reaches +-127, as `metainfer quantize` writes them
        wm = np.moveaxis(w, axis, 0).reshape(noc, -1) if per_channel else w.reshape(1, -1)
        for row in wm:
            row[self.rng.randint(0, row.size)] = 127 if self.rng.rand() < 0.5 else -127
        w = np.moveaxis(wm.reshape(np.moveaxis(w, axis, 0).shape), 0, axis) \
            if per_channel else wm.reshape(shape)
        w = np.ascontiguousarray(w)
        s = self.rng.uniform(0.002, 0.03, size=noc if per_channel else 1).astype(np.float32)
        z = np.zeros(s.shape, np.int8)
        if not per_channel:
            s, z = s.reshape(()), z.reshape(())
        out = self.uniq("w")
        attrs = {"axis": axis} if per_channel else {}
        self.nodes.append(helper.make_node(
            "DequantizeLinear", [self.const(w, "wq"), self.const(s, "ws"),
                                 self.const(z, "wz")], [out], **attrs))
        return out, s

    def bias(self, noc, sx, sw, as_int):
        if as_int:
            bs = (sx * np.broadcast_to(sw, (noc,))).astype(np.float32)
            bq = self.rng.randint(-2000, 2000, size=noc).astype(np.int32)
            out = self.uniq("b")
            self.nodes.append(helper.make_node(
                "DequantizeLinear", [self.const(bq, "bq"), self.const(bs, "bs"),
                                     self.const(np.zeros(noc, np.int32), "bz")],
                [out], axis=0))
            return out
        return self.const(self.rng.uniform(-0.5, 0.5, size=noc).astype(np.float32), "bf")

    def act(self, f):
        r = self.rng.rand()
        if r < 0.3:
            out = self.uniq("r")
            self.nodes.append(helper.make_node("Relu", [f], [out]))
            return out
        if r < 0.5:
            out = self.uniq("c")
            lo = float(self.rng.uniform(-0.5, 0.0))
            self.nodes.append(helper.make_node(
                "Clip", [f, self.const(np.array(lo, np.float32)),
                         self.const(np.array(lo + 1.5, np.float32))], [out]))
            return out
        return f

    def node(self, op, ins, **attrs):
        out = self.uniq("t")
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def save(self, d):
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 7
        onnx.save(m, os.path.join(d, self.name + ".onnx"))


def m_conv(b):
    r = b.rng
    kind = r.choice(["dense", "grouped", "depthwise"])
    g = 1
    cin = int(r.randint(1, 9))
    if kind == "grouped":
        g = int(r.choice([2, 3]))
        cin = g * int(r.randint(1, 4))
    cout = g * int(r.randint(1, 5))
    if kind == "depthwise":
        g = cin = int(r.randint(2, 12))
        cout = cin * int(r.choice([1, 2]))
    kh, kw = int(r.choice([1, 3, 5])), int(r.choice([1, 3]))
    st = [int(r.randint(1, 3)), int(r.randint(1, 3))]
    dl = [int(r.randint(1, 3)), int(r.randint(1, 3))]
    pads = [int(r.randint(0, 3)) for _ in range(4)]
    h = int(r.randint(dl[0] * (kh - 1) + 1, 14))
    w = int(r.randint(dl[1] * (kw - 1) + 1, 14))
    x, (sx, _, _) = b.qinput([1, cin, h, w])
    wf, sw = b.weights([cout, cin // g, kh, kw], r.rand() < 0.7)
    ins = [x, wf]
    if r.rand() < 0.8:
        ins.append(b.bias(cout, sx, sw, r.rand() < 0.6))
    y = b.node("Conv", ins, kernel_shape=[kh, kw], strides=st, dilations=dl,
               pads=pads, group=g)
    b.qoutput(b.act(y))


def m_gemm(b):
    r = b.rng
    k, n = int(r.randint(1, 40)), int(r.randint(1, 24))
    if r.rand() < 0.3:
        # two activations, batched (attention scores / context)
        m, nb = int(r.randint(1, 8)), [int(r.randint(1, 3)), int(r.randint(1, 4))]
        a, _ = b.qinput(nb + [m, k])
        c, _ = b.qinput(nb + [k, n] if r.rand() < 0.7 else [k, n])
        y = b.node("MatMul", [a, c])
    elif r.rand() < 0.5:
        m = int(r.randint(1, 8))
        x, (sx, _, _) = b.qinput([m, k])
        tb = int(r.rand() < 0.5)
        wf, sw = b.weights([n, k] if tb else [k, n], r.rand() < 0.7, 0 if tb else 1)
        ins = [x, wf]
        if r.rand() < 0.8:
            ins.append(b.bias(n, sx, sw, r.rand() < 0.5))
        y = b.node("Gemm", ins, transB=tb)
    else:
        shape = [int(r.randint(1, 3)), int(r.randint(1, 6)), k]
        x, _ = b.qinput(shape)
        wf, _ = b.weights([k, n], r.rand() < 0.7, 1)
        y = b.node("MatMul", [x, wf])
    b.qoutput(b.act(y))


def rshape(r, nd=None):
    nd = nd or int(r.choice([2, 3, 4, 4]))
    return [int(r.randint(1, 6)) if i else 1 for i in range(nd)] if nd == 4 else \
        [int(r.randint(1, 7)) for _ in range(nd)]


def m_eltwise(b, op):
    r = b.rng
    s = rshape(r)
    a, _ = b.qinput(s)
    form = r.choice(["same", "bcast", "const"])
    if form == "same":
        c, _ = b.qinput(s)
    elif form == "bcast":
        t = [d if r.rand() < 0.5 else 1 for d in s]
        c, _ = b.qinput(t[int(r.randint(0, len(t))):] or [1])
    else:
        t = [d if r.rand() < 0.5 else 1 for d in s]
        dt = np.uint8 if r.rand() < 0.5 else np.int8
        info = np.iinfo(dt)
        q = r.randint(info.min, info.max + 1, size=t).astype(dt)
        sc, zp = b.qparams(dt)
        c = b.dq(b.const(q, "k"), sc, zp, dt)
    ins = [a, c] if r.rand() < 0.5 else [c, a]
    y = b.node(op, ins)
    b.qoutput(b.act(y) if op == "Add" else y)


def m_clip(b):
    r = b.rng
    x, p = b.qinput(rshape(r))
    if r.rand() < 0.5:
        y = b.node("Relu", [x])
    else:
        lo = float(r.uniform(-1, 0))
        y = b.node("Clip", [x, b.const(np.array(lo, np.float32)),
                            b.const(np.array(lo + float(r.uniform(0.3, 2)), np.float32))])
    b.qoutput(y, p[2], (p[0], p[1]) if r.rand() < 0.4 else None)


def m_requant(b):
    r = b.rng
    x, _ = b.qinput(rshape(r))
    b.qoutput(x)


def m_pool(b):
    r = b.rng
    c, h, w = int(r.randint(1, 6)), int(r.randint(2, 13)), int(r.randint(2, 13))
    x, p = b.qinput([int(r.randint(1, 3)), c, h, w])
    kind = r.choice(["MaxPool", "AveragePool", "GlobalAveragePool"])
    if kind == "GlobalAveragePool":
        y = b.node(kind, [x])
    else:
        kh, kw = int(r.randint(1, min(h, 4) + 1)), int(r.randint(1, min(w, 4) + 1))
        pads = [int(r.randint(0, kh)), int(r.randint(0, kw)), int(r.randint(0, kh)),
                int(r.randint(0, kw))]
        attrs = dict(kernel_shape=[kh, kw], strides=[int(r.randint(1, 3)), int(r.randint(1, 3))],
                     pads=pads, ceil_mode=int(r.rand() < 0.3))
        if kind == "AveragePool":
            attrs["count_include_pad"] = int(r.rand() < 0.5)
        y = b.node(kind, [x], **attrs)
    same = r.rand() < 0.5
    b.qoutput(b.act(y) if kind == "MaxPool" else y, p[2], (p[0], p[1]) if same else None)


def m_concat(b):
    r = b.rng
    s = rshape(r, int(r.choice([3, 4])))
    axis = int(r.randint(0, len(s))) if len(s) == 3 else 1
    ins, p = [], None
    for i in range(int(r.randint(2, 4))):
        t = list(s)
        t[axis] = int(r.randint(1, 5))
        x, p = b.qinput(t, p[2] if p else None)
        ins.append(x)
    y = b.node("Concat", ins, axis=axis if r.rand() < 0.5 else axis - len(s))
    b.qoutput(y, p[2], (p[0], p[1]) if r.rand() < 0.5 else None)


def m_lut(b):
    r = b.rng
    x, _ = b.qinput(rshape(r))
    op = r.choice(["Sigmoid", "HardSwish", "Tanh", "HardSigmoid", "LeakyRelu"])
    attrs = {"alpha": 0.1} if op == "LeakyRelu" else {}
    y = b.node(op, [x], **attrs)
    b.qoutput(y)


FORMS = [("conv", m_conv), ("gemm", m_gemm), ("add", lambda b: m_eltwise(b, "Add")),
         ("mul", lambda b: m_eltwise(b, "Mul")), ("clip", m_clip), ("requant", m_requant),
         ("pool", m_pool), ("concat", m_concat), ("lut", m_lut)]


# ---- small fp32 networks for `metainfer quantize` ----------------------

def f32(r, *shape, scale=0.3):
    return (r.standard_normal(shape) * scale).astype(np.float32)


def net_cnn(r, d):
    """conv-relu, maxpool, depthwise + pointwise, residual add, concat,
    sigmoid gate, avgpool, GAP, gemm: 16x16 input, 10 classes."""
    N, I = [], []

    def c(a, p):
        nm = f"{p}{len(I)}"
        I.append(numpy_helper.from_array(a, nm))
        return nm

    def n(op, ins, out, **kw):
        N.append(helper.make_node(op, ins, [out], **kw))
        return out

    x = "input"
    t = n("Conv", [x, c(f32(r, 8, 3, 3, 3), "w"), c(f32(r, 8, scale=0.1), "b")], "c1",
          kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    t = n("Relu", [t], "r1")
    t = n("MaxPool", [t], "p1", kernel_shape=[2, 2], strides=[2, 2])
    d1 = n("Conv", [t, c(f32(r, 8, 1, 3, 3), "w"), c(f32(r, 8, scale=0.1), "b")], "dw",
           kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8)
    d1 = n("Relu", [d1], "r2")
    d1 = n("Conv", [d1, c(f32(r, 8, 8, 1, 1, scale=0.4), "w"), c(f32(r, 8, scale=0.1), "b")],
           "pw", kernel_shape=[1, 1])
    t = n("Add", [t, d1], "res")
    g = n("Sigmoid", [t], "sg")
    t2 = n("Conv", [t, c(f32(r, 8, 8, 3, 3, scale=0.2), "w"), c(f32(r, 8, scale=0.1), "b")],
           "c3", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1])
    t = n("Concat", [g, t2], "cat", axis=1)
    t = n("AveragePool", [t], "ap", kernel_shape=[2, 2], strides=[2, 2])
    t = n("Conv", [t, c(f32(r, 16, 16, 3, 3, scale=0.2), "w"), c(f32(r, 16, scale=0.1), "b")],
          "c4", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    t = n("Clip", [t, c(np.array(0, np.float32), "lo"), c(np.array(6, np.float32), "hi")], "r4")
    t = n("GlobalAveragePool", [t], "gap")
    t = n("Flatten", [t], "fl", axis=1)
    n("Gemm", [t, c(f32(r, 10, 16), "w"), c(f32(r, 10, scale=0.1), "b")], "output", transB=1)
    gr = helper.make_graph(N, "cnn", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])],
                           [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], I)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 7
    onnx.save(m, os.path.join(d, "net-cnn.onnx"))


def net_mlp(r, d):
    """Transformer-like block: MatMul + bias Add, Relu, MatMul, residual
    Add, per-token projection with Gemm: [1, 16, 32] tokens -> [16, 10]."""
    N, I = [], []

    def c(a, p):
        nm = f"{p}{len(I)}"
        I.append(numpy_helper.from_array(a, nm))
        return nm

    def n(op, ins, out, **kw):
        N.append(helper.make_node(op, ins, [out], **kw))
        return out

    x = "input"
    h = n("MatMul", [x, c(f32(r, 32, 64, scale=0.2), "w")], "m1")
    h = n("Add", [h, c(f32(r, 64, scale=0.1), "b")], "a1")
    h = n("Relu", [h], "r1")
    h = n("MatMul", [h, c(f32(r, 64, 32, scale=0.15), "w")], "m2")
    h = n("Add", [h, c(f32(r, 32, scale=0.1), "b")], "a2")
    h = n("Add", [x, h], "res")
    h = n("Reshape", [h, c(np.array([16, 32], np.int64), "sh")], "rs")
    n("Gemm", [h, c(f32(r, 10, 32, scale=0.2), "w"), c(f32(r, 10, scale=0.1), "b")], "output",
      transB=1)
    gr = helper.make_graph(N, "mlp", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 16, 32])],
                           [helper.make_tensor_value_info("output", TensorProto.FLOAT, [16, 10])], I)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 7
    onnx.save(m, os.path.join(d, "net-mlp.onnx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=12, help="models per op form")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.RandomState(a.seed)
    for name, fn in FORMS:
        for i in range(a.count):
            b = B(rng, f"{name}-{i:02d}")
            fn(b)
            b.save(a.out)
    net_cnn(np.random.RandomState(a.seed + 100), a.out)
    net_mlp(np.random.RandomState(a.seed + 200), a.out)


if __name__ == "__main__":
    main()
