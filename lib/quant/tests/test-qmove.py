#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Data movement between DequantizeLinear and QuantizeLinear on the bytes.

Small QDQ graphs: two int8 convs (3x3 and 1x1, batch 2) whose outputs are
DequantizeLinear'd, moved by Concat / Reshape / Transpose / Slice / Split /
Gather / Squeeze / Unsqueeze / Flatten / Identity (a ShuffleNetV2 channel
shuffle and split, each op alone, the same ops wrapped one by one in Q/DQ
pairs as ONNX Runtime's quantizer writes them, a move that an fp32 node
also reads), QuantizeLinear'd with the sources' parameters (a copy) or
others (a byte table; uint8 and int8), and read by an int8 conv.  The
first conv's channels are a multiple of 4, so without the moves its
output could be C4.

Scales are powers of two and weights small multiples of them, so every
fp32 sum is exact: the fast run must equal --reference bit for bit, on
the generic and AVX2 paths, at 1 and 3 threads; MI_DEBUG=quant must
report moves on bytes (and the float output of the move an fp32 node
reads), moves writing the C4 layout for the conv where every channel
plane is one run, and the ORT-style Q/DQ pairs between moves looked
through where they round-trip.
Then `metainfer quantize` on a conv -> Relu -> Transpose -> Slice -> conv
net: the Slice's output takes the Relu output's parameters.  ~4 s.
"""
import os
import shutil
import tempfile

import numpy as np

from qtest import MI, check, finish, run  # noqa: E402


def build(path, case, same, s8, rng, c0=3, c1=8, h=6, w=10, mq=None):
    """Returns the number of graph outputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, outs = [], [], []
    cnt = [0]

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def uniq(p):
        cnt[0] += 1
        return "%s%d" % (p, cnt[0])

    def qdq(x, sc, zp, dt=np.uint8):
        n = uniq("q")
        nodes.append(helper.make_node("QuantizeLinear",
                                      [x, const(n + "_s", np.float32(sc)),
                                       const(n + "_z", np.array(zp, dt))], [n + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [n + "_q", n + "_s", n + "_z"],
                                      [n + "_dq"]))
        return n + "_dq"

    def conv8(x, cin, cout, k):
        n = uniq("c")
        wq = rng.integers(-127, 128, (cout, cin, k, k)).astype(np.int8)
        wq.reshape(cout, -1)[:, 0] = 127
        ws = np.where(np.arange(cout) % 2, 2.0 ** -9, 2.0 ** -10).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear",
                                      [const(n + "_w", wq), const(n + "_ws", ws),
                                       const(n + "_wz", np.zeros(cout, np.int8))],
                                      [n + "_wdq"], axis=0))
        nodes.append(helper.make_node("Conv", [x, n + "_wdq"], [n + "_y"], pads=[k // 2] * 4))
        return n + "_y"

    def op(t, ins, **kw):
        n = uniq(t.lower())
        nodes.append(helper.make_node(t, ins, [n], **kw))
        return n

    x = qdq("x", 0.125, 128)
    a = qdq(conv8(x, c0, c1, 3), 0.125, 0 if s8 else 128, np.int8 if s8 else np.uint8)
    b = qdq(conv8(x, c0, c1, 1), 0.0625, 10)
    # the moved tensor's parameters: a's (a copy) or others (a table)
    ms, mz, mdt = (0.125, 0 if s8 else 128, np.int8 if s8 else np.uint8) if same else \
        (0.25, 3, np.uint8)
    if mq:
        ms, mz, mdt = mq
    ort = case in ("ort", "ort mixed")

    def wrap(t):  # ONNX Runtime's quantizer: Q/DQ after every move
        return qdq(t, ms, mz, mdt) if ort else t

    cm, mh, mw = c1, h, w
    extra = None
    if case in ("shuffle", "ort", "ort mixed", "split"):
        cat = op("Concat", [a, b], axis=1)
        if case == "ort":  # "ort mixed": a and b reach the Reshape's Q
            cat = wrap(cat)
        r = wrap(op("Reshape", [cat, const(uniq("shp"), np.array([2, 2, c1, h * w]))]))
        tr = wrap(op("Transpose", [r], perm=[0, 2, 1, 3]))
        r2 = wrap(op("Reshape", [tr, const(uniq("shp"), np.array([2, 2 * c1, h, w]))]))
        if case == "split":
            n = uniq("split")
            nodes.append(helper.make_node("Split", [r2, const(n + "_s", np.array([3, 2 * c1 - 3]))],
                                          [n + "_a", n + "_b"], axis=1))
            m = n + "_b"
            cm = 2 * c1 - 3
            extra = (n + "_a", 3)
        else:  # the end from Shape, as torch exports ShuffleNetV2's split
            en = op("Gather", [op("Shape", [r2]), const(uniq("ix"), np.array([1]))], axis=0)
            m = op("Slice", [r2, const(uniq("st"), np.array([c1])), en,
                             const(uniq("ax"), np.array([1]))])
    elif case == "transpose":  # runs of w bytes
        m = op("Transpose", [a], perm=[0, 2, 1, 3])
        cm, mh = h, c1
    elif case == "transpose hw":  # runs of 1 byte: stays fp32
        m = op("Transpose", [a], perm=[0, 1, 3, 2])
        mh, mw = w, h
    elif case == "slice":
        m = op("Slice", [a, const(uniq("st"), np.array([1, -1, 1])),
                         const(uniq("en"), np.array([w, -h - 1, 99])),
                         const(uniq("ax"), np.array([3, 2, 1])),
                         const(uniq("sp"), np.array([1, -1, 2]))])
        mw, cm = w - 1, c1 // 2
    elif case == "gather":
        idx = np.array([3, 0, -1, 2, 2, 5, 7, -8], np.int64)
        m = op("Gather", [a, const(uniq("ix"), idx)], axis=1)
        cm = len(idx)
    elif case == "views":
        u = op("Unsqueeze", [a, const(uniq("ax"), np.array([0]))])
        s = op("Squeeze", [u, const(uniq("ax"), np.array([0]))])
        f = op("Flatten", [s], axis=1)
        r = op("Reshape", [f, const(uniq("shp"), np.array([2, c1, h, w]))])
        m = op("Identity", [r])
    elif case == "fp32 reader":  # the Transpose runs in fp32, the Slice on bytes
        t = op("Transpose", [a], perm=[0, 2, 1, 3])
        m = op("Slice", [t, const(uniq("st"), np.array([0])), const(uniq("en"), np.array([99])),
                         const(uniq("ax"), np.array([2]))])
        cm, mh = h, c1
        z = op("Relu", [t])
        outs.append(helper.make_tensor_value_info(z, TensorProto.FLOAT, [2, h, c1, w]))
    y = qdq(conv8(qdq(m, ms, mz, mdt), cm, 5, 1), 0.125, 128)
    outs.insert(0, helper.make_tensor_value_info(op("Identity", [y]), TensorProto.FLOAT,
                                                 [2, 5, mh, mw]))
    if extra:
        e = qdq(conv8(qdq(extra[0], ms, mz, mdt), extra[1], 4, 1), 0.125, 128)
        outs.append(helper.make_tensor_value_info(op("Identity", [e]), TensorProto.FLOAT,
                                                  [2, 4, mh, mw]))
    gr = helper.make_graph(nodes, "moves",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c0, h, w])],
                           outs, inits)
    mdl = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(mdl)
    onnx.save(mdl, path)
    return len(outs)


def mi_run(model, x, tmp, nout, env=None, threads=1, extra=()):
    inp, od = os.path.join(tmp, "x.npy"), os.path.join(tmp, "out")
    shutil.rmtree(od, ignore_errors=True)
    np.save(inp, x)
    r = run([MI, "run", model, "--input", inp, "-o", od, "--threads", str(threads), "-q",
             *extra], env)
    files = sorted(os.listdir(od))
    return [np.load(os.path.join(od, f)) for f in files], r.stderr


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b))


def quantizer(tmp, rng):
    """metainfer quantize: a tensor that Transpose + Slice make from one
    quantized tensor gets its parameters, and so do two Relu outputs from
    the Concat that alone reads them; the int8 file runs its moves on the
    bytes, close to --reference."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 8, 1, 1)).astype(np.float32)
    wa = rng.standard_normal((4, 12, 1, 1)).astype(np.float32)
    wb = (3 * rng.standard_normal((4, 12, 1, 1))).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Transpose", ["r1"], ["t1"], perm=[0, 2, 1, 3]),
             helper.make_node("Slice", ["t1", "st", "en", "ax"], ["s1"]),
             helper.make_node("Conv", ["s1", "wa"], ["ca"]),
             helper.make_node("Relu", ["ca"], ["ra"]),
             helper.make_node("Conv", ["s1", "wb"], ["cb"]),
             helper.make_node("Relu", ["cb"], ["rb"]),
             helper.make_node("Concat", ["ra", "rb"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w2"], ["y"])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(wa, "wa"), numpy_helper.from_array(wb, "wb"),
             numpy_helper.from_array(np.array([2]), "st"),
             numpy_helper.from_array(np.array([9]), "en"),
             numpy_helper.from_array(np.array([2]), "ax")]
    gr = helper.make_graph(nodes, "qmv",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 10])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 10])],
                           inits)
    fp32 = os.path.join(tmp, "f.onnx")
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), fp32)
    q = os.path.join(tmp, "q.onnx")
    run([MI, "quantize", fp32, "--calib-random", "8", "-o", q])
    m = onnx.load(q)
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    qp = {n.input[0]: (float(init[n.input[1]]), int(init[n.input[2]]))
          for n in m.graph.node if n.op_type == "QuantizeLinear"}
    cat = (qp.get("ra"), qp.get("rb"), qp.get("cat"))
    check(cat[2] is not None and cat[0] == cat[2] and cat[1] == cat[2],
          "quantizer: Concat inputs take the output's parameters")
    check(qp.get("r1") is not None and qp.get("r1") == qp.get("s1"),
          "quantizer: Transpose + Slice output takes its source's parameters %s" %
          ((qp.get("r1"), qp.get("s1")),))
    x = rng.uniform(-1, 1, (1, 3, 12, 10)).astype(np.float32)
    got, err = mi_run(q, x, tmp, 1, {"MI_DEBUG": "quant"})
    ref, _ = mi_run(q, x, tmp, 1, extra=("--reference",))
    d = max(np.abs(p - r).max() for p, r in zip(got, ref))
    check("moves on bytes" in err and len(got) == len(ref) and d <= 0.05 * np.abs(ref[0]).max(),
          "quantizer: moves on bytes, ~ --reference (max diff %.3g)" % d)


def many_sources(tmp, rng):
    """Concat of k DQ'd copies of the input, each its own scale, -> Q: on
    bytes up to 64 sources (one node's inputs), fp32 beyond."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    for k in (40, 70):
        nodes, inits, cat = [], [], []
        for i in range(k):
            inits += [numpy_helper.from_array(np.float32(2.0 ** -(i % 5 + 2)), "s%d" % i),
                      numpy_helper.from_array(np.array(i % 7 + 120, np.uint8), "z%d" % i)]
            nodes += [helper.make_node("QuantizeLinear", ["x", "s%d" % i, "z%d" % i], ["q%d" % i]),
                      helper.make_node("DequantizeLinear", ["q%d" % i, "s%d" % i, "z%d" % i],
                                       ["d%d" % i])]
            cat.append("d%d" % i)
        inits += [numpy_helper.from_array(np.float32(0.25), "sy"),
                  numpy_helper.from_array(np.array(128, np.uint8), "zy")]
        nodes += [helper.make_node("Concat", cat, ["c"], axis=1),
                  helper.make_node("Reshape", ["c", "shp"], ["r"]),
                  helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["rq"]),
                  helper.make_node("DequantizeLinear", ["rq", "sy", "zy"], ["y"])]
        inits.append(numpy_helper.from_array(np.array([2, -1]), "shp"))
        gr = helper.make_graph(nodes, "many",
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                              [2, 60 * k])], inits)
        path = os.path.join(tmp, "many.onnx")
        onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), path)
        x = (rng.integers(-200, 200, (2, 3, 4, 5)) / 16).astype(np.float32)
        got, err = mi_run(path, x, tmp, 1, {"MI_DEBUG": "quant"})
        ref, _ = mi_run(path, x, tmp, 1, extra=("--reference",))
        check(same(got, ref) and ("moves on bytes" in err) == (k <= 64),
              "Concat of %d sources: on bytes %s, == --reference" %
              (k, k <= 64))


def fixed_point(tmp, rng):
    """Moved bytes requantized to a scale that is no power of two (nor a
    simple fraction: (q - zp) * ratio never a tie of the rounding): the
    byte tables in fixed point (qmv_aff_fit) on AVX2, C4 quads mixing int8
    and uint8 sources, planes of 63 bytes (a partial last vector) and 64.
    The conv after the move no longer sums exactly: close to --reference
    (within half a step), and equal at 1 and 3 threads."""
    for case in ("shuffle", "split", "ort mixed"):
        for s8, mq in ((False, (0.2973, 3, np.uint8)), (True, (0.1731, -5, np.int8)),
                       (True, (0.4127, 200, np.uint8))):
            for h, w in ((7, 9), (8, 8)):
                path = os.path.join(tmp, "fp.onnx")
                nout = build(path, case, False, s8, rng, h=h, w=w, mq=mq)
                x = (rng.integers(-100, 100, (2, 3, h, w)) / 8).astype(np.float32)
                off, _ = mi_run(path, x, tmp, nout, extra=("--reference",))
                one = None
                for t, env in ((1, {}), (3, {})):
                    env = dict(env, MI_CPU_ISA="avx2", MI_DEBUG="quant")
                    got, err = mi_run(path, x, tmp, nout, env, threads=t)
                    one = got if one is None else one
                    fx = [ln for ln in err.splitlines() if "in fixed point" in ln]
                    what = "fixed point: %s, %s %s, %dx%d t%d" % (case, mq[2].__name__, mq[:2],
                                                                 h, w, t)
                    check(len(fx) == 1 and not fx[0].split()[2] == "0",
                          what + ": moves requantized in fixed point")
                    check(same(got, one), what + ": == 1 thread")
                    d = max(np.abs(p - q).max() for p, q in zip(got, off))
                    check(len(got) == len(off) and d <= 0.5,
                          what + ": ~ --reference (fp32 sums)")


def main():
    tmp = tempfile.mkdtemp(prefix="mi-qmove-")
    rng = np.random.default_rng(12)
    cases = ["shuffle", "split", "ort", "ort mixed", "transpose", "transpose hw", "slice", "gather", "views",
             "fp32 reader"]
    for case in cases:
        for eq, s8 in ((True, False), (False, False), (True, True), (False, True)):
            path = os.path.join(tmp, "m.onnx")
            nout = build(path, case, eq, s8, rng)
            x = (rng.integers(-100, 100, (2, 3, 6, 10)) / 8).astype(np.float32)
            tag = "%s, %s parameters, %s" % (case, "same" if eq else "other",
                                             "int8" if s8 else "uint8")
            ref, _ = mi_run(path, x, tmp, nout, extra=("--reference",))
            check(len(ref) == nout and np.abs(ref[0]).max() > 1 and len(np.unique(ref[0])) > 20,
                  tag + ": reference output not trivial")
            for isa in ("generic", "avx2"):
                for t, env in ((1, {}), (3, {})):
                    env = dict(env, MI_CPU_ISA=isa, MI_DEBUG="quant")
                    got, err = mi_run(path, x, tmp, nout, env, threads=t)
                    what = "%s %s t%d" % (tag, isa, t)
                    mv = case != "transpose hw"
                    check(("moves on bytes" in err) == mv,
                          what + ": moves planned on bytes: %s" % mv)
                    # every channel plane one run: the C4 layout for the conv
                    c4 = case in ("shuffle", "ort", "ort mixed", "gather", "views")
                    check(("(0 written by moves)" not in err) == c4,
                          what + ": moves write C4: %s" % c4)
                    if case == "fp32 reader":
                        # the Transpose writes floats for the Relu (the DQ's
                        # values)
                        check("1 fp32 outputs" in err, what + ": 1 fp32 output")
                    if case.startswith("ort"):
                        # Q/DQ pairs looked through: one move (mixed: the
                        # Reshape's Q requantizes a and b, then one more)
                        nm = 2 if case == "ort mixed" else 1
                        check("%d moves on bytes" % nm in err, what + ": %d moves" % nm)
                    check(same(got, ref), what + ": == --reference")
                    if not same(got, ref) and len(got) == len(ref):
                        print("   max diff", max(np.abs(p - q).max() for p, q in zip(got, ref)))
    many_sources(tmp, rng)
    fixed_point(tmp, rng)
    quantizer(tmp, rng)
    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
