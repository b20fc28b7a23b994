#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end int8 test: `metainfer quantize` + int8 execution.

A small seeded CNN (3x3, strided depthwise + Relu6, 1x1, residual Add,
MaxPool, dilated grouped conv, Concat, GlobalAveragePool, Gemm; batch 2) is
exported at opset 13 and quantized (QDQ per channel, QDQ per tensor,
QLinear, percentile calibration).  For each quantized model:
  - onnx.checker accepts it;
  - metainfer plans the int8 kernels (MI_DEBUG=quant line);
  - int8 outputs vs fp32: cosine >= 0.99 on seeded inputs;
  - int8 kernels vs the reference QDQ/QLinear ops (--reference): close;
  - the int8 kernels give bit-identical outputs on every ISA path;
  - ONNX Runtime (if built) loads and runs it, and agrees.
A second net (5x5/7x7 depthwise, SiLU, HardSwish, Sigmoid/HardSigmoid
squeeze-excite) checks the depthwise kernels and activation tables.
Bad command lines and files give one line and a non-zero exit.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from qtest import MI, ROOT, check, failures, run  # noqa: E402

ORT_JS = os.path.join(ROOT, "tools/bench/ort-run.js")
ORT_DIR = os.path.join(ROOT, "build/ort/node_modules/onnxruntime-node")


def export(path):
    import torch
    import torch.nn as nn

    torch.manual_seed(7)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
            self.c3 = nn.Conv2d(16, 24, 1)
            self.c4 = nn.Conv2d(24, 24, 3, padding=1)
            self.c5 = nn.Conv2d(24, 32, 3, padding=2, dilation=2, groups=2)
            self.c6 = nn.Conv2d(32, 8, 1)
            self.c7 = nn.Conv2d(40, 16, 1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            x = torch.clamp(self.c2(x), 0, 6)
            y = self.c3(x)
            x = torch.relu(y + torch.relu(self.c4(y)))
            x = nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.c5(x))
            x = torch.cat([x, torch.relu(self.c6(x))], 1)
            x = torch.relu(self.c7(x))
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return self.fc(x)

    net = Net().eval()
    torch.onnx.export(net, torch.zeros(2, 3, 20, 20), path, opset_version=13,
                      input_names=["input"], output_names=["logits"])


def export_act(path):
    """EfficientNet/MobileNetV3-like block: 5x5 depthwise (stride 1 and 2),
    SiLU, HardSwish, squeeze-excite with Sigmoid and HardSigmoid."""
    import torch
    import torch.nn as nn

    torch.manual_seed(11)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.d1 = nn.Conv2d(16, 16, 5, padding=2, groups=16)
            self.d2 = nn.Conv2d(16, 16, 5, stride=2, padding=2, groups=16)
            self.se0 = nn.Conv2d(16, 16, 1)
            self.c0 = nn.Conv2d(16, 16, 1)
            self.se1 = nn.Conv2d(16, 4, 1)
            self.se2 = nn.Conv2d(4, 16, 1)
            self.c2 = nn.Conv2d(16, 24, 1)
            self.d3 = nn.Conv2d(24, 24, 7, padding=3, groups=24)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            x = nn.functional.silu(self.c1(x))
            x = nn.functional.hardswish(self.d1(x))
            # gates on 20x20 (per-channel tables) and 10x10 planes (direct)
            x = x * torch.sigmoid(self.se0(nn.functional.adaptive_avg_pool2d(x, 1)))
            x = self.c0(x)  # the gate writes the C4 layout for this conv
            x = nn.functional.silu(self.d2(x))
            s = torch.sigmoid(self.se2(nn.functional.silu(
                self.se1(nn.functional.adaptive_avg_pool2d(x, 1)))))
            x = x * s
            x = self.c2(x)
            x = x * nn.functional.hardsigmoid(self.d3(x))
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return self.fc(x)

    net = Net().eval()
    torch.onnx.export(net, torch.zeros(2, 3, 20, 20), path, opset_version=13,
                      input_names=["input"], output_names=["logits"])


def export_se(path, stride, act="hardswish"):
    """HardSwish -> squeeze-excite gate -> 1x1 conv: the gate Mul runs as
    an int8 node writing the conv's C4 input (per-channel tables on 20x20
    planes, direct products on 10x10)."""
    import torch
    import torch.nn as nn

    torch.manual_seed(13)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, stride=stride, padding=1)
            self.se = nn.Conv2d(16, 16, 1)
            self.c2 = nn.Conv2d(16, 8, 1)

        def forward(self, x):
            x = getattr(nn.functional, act)(self.c1(x))
            x = x * torch.sigmoid(self.se(nn.functional.adaptive_avg_pool2d(x, 1)))
            return self.c2(x)

    torch.onnx.export(Net().eval(), torch.zeros(2, 3, 20, 20), path, opset_version=13,
                      input_names=["input"], output_names=["y"])


def export_fire(path):
    """SqueezeNet-like fire modules after a MaxPool: a squeeze conv read by
    two convs (C4 with two readers), their Concat read by a conv (C4
    Concat), and a Concat with channel counts that are not multiples of 4
    (planar).  The MaxPool runs on C4 too."""
    import torch
    import torch.nn as nn

    torch.manual_seed(17)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.sq = nn.Conv2d(16, 8, 1)
            self.e1 = nn.Conv2d(8, 16, 1)
            self.e3 = nn.Conv2d(8, 12, 3, padding=1)
            self.sq2 = nn.Conv2d(28, 8, 1)
            self.f1 = nn.Conv2d(8, 6, 1)
            self.f3 = nn.Conv2d(8, 10, 3, padding=1)
            self.out = nn.Conv2d(16, 8, 3)

        def forward(self, x):
            r = nn.functional.relu
            x = nn.functional.max_pool2d(r(self.c1(x)), 3, 2, ceil_mode=True)
            s = r(self.sq(x))
            x = torch.cat([r(self.e1(s)), r(self.e3(s))], 1)
            s = r(self.sq2(x))
            x = torch.cat([r(self.f1(s)), r(self.f3(s))], 1)
            return self.out(x)

    torch.onnx.export(Net().eval(), torch.zeros(2, 3, 20, 20), path, opset_version=13,
                      input_names=["input"], output_names=["y"])


def export_res(path):
    """Residual blocks: conv outputs through int8 Add (+Relu) and a
    HardSwish table into convs: the residual stream stays in C4 layout."""
    import torch
    import torch.nn as nn

    torch.manual_seed(19)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.a = nn.Conv2d(16, 16, 3, padding=1)
            self.b = nn.Conv2d(16, 16, 1)
            self.d = nn.Conv2d(16, 16, 3, padding=1)
            self.e = nn.Conv2d(16, 16, 1)
            self.out = nn.Conv2d(16, 8, 1)

        def forward(self, x):
            r = nn.functional.relu
            x = r(self.c1(x))
            x = r(self.b(r(self.a(x))) + x)
            x = self.e(nn.functional.hardswish(self.d(x))) + x
            return self.out(x)

    torch.onnx.export(Net().eval(), torch.zeros(2, 3, 20, 20), path, opset_version=13,
                      input_names=["input"], output_names=["y"])


def mi_run(model, x, tmp, env=None, tag="o", threads=1, extra=()):
    inp = os.path.join(tmp, "x.npy")
    out = os.path.join(tmp, tag + ".npy")
    np.save(inp, x)
    run([MI, "run", model, "--input", inp, "--output", out, "--threads", str(threads)] +
        list(extra), env)
    return np.load(out)


def ort_exact_int8():
    """Does ONNX Runtime compute u8 x s8 dot products exactly on this CPU?
    With VNNI (vpdpbusd) or AMX it does, like metainfer's kernels on every
    ISA.  On AVX2 without VNNI its kernels add two adjacent products with
    vpmaddubsw, which saturates at 16 bits (ORT's quantization docs warn of
    it): wherever two large activations meet two large weights of one sign
    its result leaves the exact integer one.  Then ORT is only a loose peer
    (cosine), and exactness rests on the generic-ISA comparisons."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f
                          if l.startswith("flags")), [])
    except OSError:
        return False
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(flags))


ORT_EXACT = ort_exact_int8()


def ort_compare(model, x, ours, tmp):
    """(max |ORT - ours| / max |ORT|, cosine) for ONNX Runtime on the same
    file and input; (1, 0) when ONNX Runtime fails to run it."""
    inp, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "ort.npy")
    np.save(inp, x)
    r = run(["node", ORT_JS, model, "--input", inp, "--output", out], ok=False)
    if r.returncode:
        return 1.0, 0.0
    o = np.load(out)
    return float(np.abs(o - ours).max() / (np.abs(o).max() + 1e-12)), cos(o, ours)


def check_ort(what, model, x, ours, tmp, tol=1e-6):
    """ONNX Runtime on the same file gives our int8 output: up to float
    rounding of the fp32 tail (tol) where it computes exactly, else a
    cosine >= 0.99 (see ort_exact_int8: on the tests' small nets with
    full-range weights its saturation costs up to ~0.007 of cosine, while
    the reference QDQ ops agree with the int8 kernels to 1e-7)."""
    d, c = ort_compare(model, x, ours, tmp)
    if ORT_EXACT:
        check(d < tol and c > 0.99999,
              f"{what}: ONNX Runtime on the same file vs metainfer int8: max rel diff {d:.1e}, cosine {c:.7f}")
    else:
        check(c > 0.99,
              f"{what}: ONNX Runtime (saturating AVX2 u8s8 kernels, no VNNI) on the same file vs "
              f"metainfer int8: cosine {c:.7f} (max rel diff {d:.1e})")


def cos(a, b):
    a = a.ravel().astype(np.float64)
    b = b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def check_qdq_standalone(tmp):
    """Standalone QuantizeLinear/DequantizeLinear (no conv to fuse with)
    run on split fast kernels: same bytes as numpy's float32 formula on
    every ISA, at 1 and 3 threads."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(11)
    x = rng.normal(0, 3, (2, 3, 50, 70)).astype(np.float32)
    x.flat[:4] = [1e9, -1e9, 0.0, -0.0]
    for dt, np_dt, zp, sc in ((TensorProto.UINT8, np.uint8, 117, 0.037),
                             (TensorProto.INT8, np.int8, -3, 0.021)):
        lo, hi = np.iinfo(np_dt).min, np.iinfo(np_dt).max
        sc32 = np.float32(sc)
        ties = (np.arange(40, dtype=np.float32) - 20 + np.float32(0.5)) * sc32
        x.flat[8:48] = ties
        g = helper.make_graph(
            [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
            "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor("s", TensorProto.FLOAT, [], [sc]),
             helper.make_tensor("z", dt, [], [zp])])
        path = os.path.join(tmp, "qdq-%s.onnx" % np.dtype(np_dt).name)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        q = np.clip(np.rint(x / sc32) + np.float32(zp), lo, hi).astype(np_dt)
        want = ((q.astype(np.int32) - zp).astype(np.float32) * sc32).astype(np.float32)
        r = run([MI, "run", path, "-q", "--bench", "1", "--profile"])
        check("[reference]" not in r.stdout,
              f"qdq {np.dtype(np_dt).name}: standalone Q/DQ run on fast kernels")
        ok = True
        for isa in ("generic", "avx2", "avx512"):
            for t, env in ((1, {}), (3, {})):
                env = dict(env, MI_CPU_ISA=isa)
                ok &= np.array_equal(mi_run(path, x, tmp, env, threads=t), want)
        check(ok, f"qdq {np.dtype(np_dt).name}: == numpy on generic/avx2/avx512, 1 thread and split over 3")


def check_act_ranges(tmp):
    """--range mse-act judges a tensor's range by the error after what its
    readers compute (--range mse by |x|): a tensor read only by a HardSigmoid keeps at most the
    HardSigmoid's sloped part [-3, 3]; one read by x * HardSigmoid(x) drops
    the part below -3 (zero there) and keeps its top; one read by SiLU
    clips its far negative values (SiLU ~ 0 there) more than the top.  The
    convolutions' outputs span about +-12."""
    import onnx
    import torch
    import torch.nn as nn
    from onnx import numpy_helper

    torch.manual_seed(17)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.b = nn.Conv2d(3, 8, 3, padding=1)
            self.c = nn.Conv2d(3, 8, 3, padding=1)
            self.d = nn.Conv2d(8, 4, 1)
            for m in (self.a, self.b, self.c):
                m.weight.data *= 20

        def forward(self, x):
            y = (nn.functional.hardsigmoid(self.a(x)) * nn.functional.hardswish(self.b(x)) +
                 nn.functional.silu(self.c(x)))
            return self.d(y)

    path = os.path.join(tmp, "actr.onnx")
    torch.onnx.export(Net().eval(), torch.zeros(1, 3, 12, 12), path, opset_version=13,
                      input_names=["input"], output_names=["y"])
    rng = {}
    for tag, extra in (("act", ["--range", "mse-act"]), ("mse", []),
                       ("minmax", ["--range", "minmax"])):
        q = os.path.join(tmp, "actr-%s.onnx" % tag)
        run([MI, "quantize", path, "--calib-random", "16", "-o", q] + extra)
        ini = {t.name: numpy_helper.to_array(t) for t in onnx.load(q).graph.initializer}
        for k in ("a", "b", "c"):
            s = float(ini["/%s/Conv_output_0_scale" % k])
            z = int(ini["/%s/Conv_output_0_zero_point" % k])
            rng[tag, k] = (-z * s, (255 - z) * s)
    (alo, ahi), (blo, bhi), (clo, chi) = (rng["act", k] for k in "abc")
    (mlo, mhi), (nlo, nhi), (olo, ohi) = (rng["minmax", k] for k in "abc")
    # the limits tried lie every 8th bin of a 2048-bin histogram
    bin_ = max(h - l for l, h in (rng["minmax", k] for k in "abc")) * 9 / 2048
    check(min(mlo, nlo, olo) < -6 and max(mhi, nhi, ohi) > 6,
          f"--range mse-act test net: calibrated ranges past +-6 ({mlo:.1f}..{mhi:.1f})")
    check(-3 - bin_ <= alo < 0 < ahi <= 3 + bin_,
          f"--range mse-act: HardSigmoid input within [-3, 3] ({alo:.2f}..{ahi:.2f})")
    check(-3 - bin_ <= blo and bhi > 0.9 * nhi,
          f"--range mse-act: HardSwish input from -3, top kept ({blo:.2f}..{bhi:.2f} of {nlo:.2f}..{nhi:.2f})")
    check(clo > olo + 0.3 * (-olo) and clo - olo > 4 * (ohi - chi),
          f"--range mse-act: SiLU input clipped below more than above ({clo:.2f}..{chi:.2f} of {olo:.2f}..{ohi:.2f})")
    dlo, dhi = rng["mse", "a"]
    check(dlo < -4 and dhi > 4, f"--range mse (default): |x| ranges, HardSigmoid input {dlo:.2f}..{dhi:.2f}")


def check_se_ties(tmp):
    """SE gate Mul on the bytes (qse, C4 output for an int8 1x1 conv) with
    products whose quotients by the output scale lie within a few ulps of
    half-integers: the division-free rounding must fall back to the
    division exactly where that changes a byte.  The DQ map is k / 16, the
    gates (k_c + 0.5) * 0.1 +- 0..3 ulps over 64 channels, the pixels
    +-1, +-3, 5 times 1/16 steps (products near ties); 7x7 (per-pixel
    lookups) and 14x14 (per-channel byte tables), avx512 == generic == avx2;
    16x16 (byte tables on AVX2 too) (products through a
    float buffer and mi_quantize_f32 instead of qse_direct_avx2's
    registers) on AVX2 as well."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(9)
    c, co = 64, 8
    base = ((np.arange(c) % 23) + 0.5).astype(np.float64) * 0.1
    g = np.array([np.nextafter(np.float32(b), np.float32(np.inf * (u or 1)), dtype=np.float32)
                  if u else np.float32(b) for b, u in zip(base, rng.integers(-3, 4, c))],
                 np.float32)
    for k in range(c):  # a few more ulps either way
        for _ in range(int(rng.integers(0, 3))):
            g[k] = np.nextafter(g[k], np.float32(np.inf if k % 2 else -np.inf))
    w = rng.integers(-127, 128, (co, c, 1, 1)).astype(np.int8)
    ok, n_near = True, 0
    for hw in (7, 14, 16):
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
                 helper.make_node("Mul", ["d", "g"], ["m"]),
                 helper.make_node("QuantizeLinear", ["m", "s2", "z2"], ["mq"]),
                 helper.make_node("DequantizeLinear", ["mq", "s2", "z2"], ["md"]),
                 helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                 helper.make_node("Conv", ["md", "wd"], ["y"])]
        gr = helper.make_graph(
            nodes, "se_ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, co, hw, hw])],
            [helper.make_tensor("s", TensorProto.FLOAT, [], [1 / 16]),
             helper.make_tensor("z", TensorProto.UINT8, [], [128]),
             helper.make_tensor("s2", TensorProto.FLOAT, [], [0.1]),
             helper.make_tensor("z2", TensorProto.UINT8, [], [100]),
             numpy_helper.from_array(g.reshape(1, c, 1, 1), "g"), numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.full(co, 2.0 ** -10, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(co, np.int8), "wz")])
        path = os.path.join(tmp, "se_ties%d.onnx" % hw)
        onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), path)
        t = rng.choice(np.array([1, -1, 3, -3, 5, 2, 0.5], np.float32), (1, c, hw, hw))
        x = (t * np.float32(1)).astype(np.float32)
        q = np.float32(x) * g.reshape(1, c, 1, 1)
        r = q.astype(np.float64) / np.float64(np.float32(0.1))
        n_near += int((np.abs(np.abs(r - np.floor(r)) - 0.5) < 2.0 ** -11).sum())
        r = run([MI, "run", path, "-q", "--bench", "1", "--profile"])
        ok &= bool(re.search(r"^\s*Mul\s+1\s+1\s", r.stdout, re.M))
        envs = [{"MI_CPU_ISA": "generic"}, {"MI_CPU_ISA": "avx2"}, {"MI_CPU_ISA": "avx512"}]
        outs = [mi_run(path, x, tmp, e) for e in envs]
        for o, isa in zip(outs[1:], ("avx2", "avx512")):
            if not np.array_equal(o, outs[0]):
                ok = False
                print(f"  se ties {hw}x{hw} {isa}: {int((o != outs[0]).sum())} outputs differ from generic")
    check(ok and n_near > 500, f"se ties: SE Mul on the bytes, {n_near} products near ties, "
          "avx512 == avx2 == generic (7x7 lookups, 14x14 and 16x16 byte tables)")


def check_se_c4(tmp):
    """The SE gate Mul and GlobalAveragePool reading their bytes in C4
    layout (a 4-D Q writing C4 here, an int8 depthwise conv in the
    networks): GAP(DQ(q)) + b as the gate of Mul(DQ(q), gate) feeding an
    int8 1x1 conv; 24 channels (GAP work items of 16 and 8 planes),
    7x7 (per-pixel products), 20x20 (byte tables), AVX2 at 1 and 2
    threads == generic (planes), and the plan must hold C4
    activations; 36 channels at 7x7 (items of 4, 4 and 1 quads; 24: 4 and
    2) for the pool's sums on maps of 32-63 pixels (gap_sums_avx2_c4s)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    c, co = 24, 8
    w = rng.integers(-127, 128, (co, c, 1, 1)).astype(np.int8)
    ok = True
    for c, hw in ((24, 7), (24, 20), (36, 7)):
        if c != 24:
            w = rng.integers(-127, 128, (co, c, 1, 1)).astype(np.int8)
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
                 helper.make_node("GlobalAveragePool", ["d"], ["gp"]),
                 helper.make_node("Add", ["gp", "b"], ["gt"]),
                 helper.make_node("Mul", ["d", "gt"], ["m"]),
                 helper.make_node("QuantizeLinear", ["m", "s2", "z2"], ["mq"]),
                 helper.make_node("DequantizeLinear", ["mq", "s2", "z2"], ["md"]),
                 helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                 helper.make_node("Conv", ["md", "wd"], ["y"])]
        # gp_out: the pool's means first (fp32, the bits of its sums)
        gp_out = [helper.make_tensor_value_info("gp", TensorProto.FLOAT, [1, c, 1, 1])]
        gr = helper.make_graph(
            nodes, "se_c4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, co, hw, hw])],
            [helper.make_tensor("s", TensorProto.FLOAT, [], [1 / 16]),
             helper.make_tensor("z", TensorProto.UINT8, [], [128]),
             helper.make_tensor("s2", TensorProto.FLOAT, [], [0.1]),
             helper.make_tensor("z2", TensorProto.UINT8, [], [100]),
             numpy_helper.from_array(rng.uniform(-1, 1, (1, c, 1, 1)).astype(np.float32), "b"),
             numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.full(co, 2.0 ** -10, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(co, np.int8), "wz")])
        path = os.path.join(tmp, "se_c4_%d_%d.onnx" % (c, hw))
        onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), path)
        x = rng.uniform(-6, 6, (1, c, hw, hw)).astype(np.float32)
        # the means bit for bit: AVX2 C4 sums == the generic ISA's planes
        gr.output.insert(0, gp_out[0])
        gpath = os.path.join(tmp, "se_c4_gp_%d_%d.onnx" % (c, hw))
        onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), gpath)
        gp = [mi_run(gpath, x, tmp, {"MI_CPU_ISA": e}).view(np.uint32)
              for e in ("generic", "avx2")]
        if not np.array_equal(gp[0], gp[1]):
            ok = False
            print(f"  se c4 c{c} {hw}x{hw}: pool means differ from the planes' "
                  f"({int((gp[0] != gp[1]).sum())} C4)")
        r = run([MI, "run", path, "-q", "--bench", "1"], {"MI_CPU_ISA": "avx2", "MI_DEBUG": "quant"})
        m = re.search(r"(\d+) activations in C4 layout", r.stderr)
        if not (m and int(m.group(1)) > 0):
            ok = False
            print(f"  se c4 c{c} {hw}x{hw}: no C4 activations")
        ref = mi_run(path, x, tmp, {"MI_CPU_ISA": "generic"})
        for e, t in (({"MI_CPU_ISA": "avx2"}, 1), ({"MI_CPU_ISA": "avx2"}, 2)):
            o = mi_run(path, x, tmp, e, threads=t)
            if not np.array_equal(o, ref):
                ok = False
                print(f"  se c4 c{c} {hw}x{hw} {e} -t {t}: {int((o != ref).sum())} outputs differ from planar generic")
    check(ok, "se c4: SE Mul and GlobalAveragePool reading C4 bytes == planar (generic) "
          "(7x7, 20x20 at 24 channels, 7x7 at 36, 1 and 2 threads)")


def check_add_fma(tmp):
    """int8 Add (DQ(a) + DQ(b) -> Q) on every pair of input bytes, with
    scales for which one fused multiply-add (a * sa + b * sb rounded once)
    changes 2-3 of the 65536 output bytes against the reference's two
    roundings: every ISA must give the reference's bytes (qadd_avx2 was
    compiled with FMA and gcc contracted the sum)."""
    import onnx
    from onnx import TensorProto, helper

    sa, sb, sy = np.float32(0.11888735741376877), np.float32(0.09174063056707382), \
        np.float32(0.08947788178920746)
    za, zb, zy = 128, 100, 90
    nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["da"]),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["db"]),
             helper.make_node("Add", ["da", "db"], ["s"]),
             helper.make_node("QuantizeLinear", ["s", "sy", "zy"], ["y"])]
    g = helper.make_graph(
        nodes, "add_fma",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 1, 256, 256]),
         helper.make_tensor_value_info("b", TensorProto.UINT8, [1, 1, 256, 256])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 1, 256, 256])],
        [helper.make_tensor("sa", TensorProto.FLOAT, [], [sa]),
         helper.make_tensor("za", TensorProto.UINT8, [], [za]),
         helper.make_tensor("sb", TensorProto.FLOAT, [], [sb]),
         helper.make_tensor("zb", TensorProto.UINT8, [], [zb]),
         helper.make_tensor("sy", TensorProto.FLOAT, [], [sy]),
         helper.make_tensor("zy", TensorProto.UINT8, [], [zy])])
    path = os.path.join(tmp, "add_fma.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    a = np.arange(256, dtype=np.uint8).repeat(256).reshape(1, 1, 256, 256)
    b = np.tile(np.arange(256, dtype=np.uint8), 256).reshape(1, 1, 256, 256)
    pa, pb = os.path.join(tmp, "add_a.npy"), os.path.join(tmp, "add_b.npy")
    np.save(pa, a)
    np.save(pb, b)
    fa = (a.astype(np.int32) - za).astype(np.float32)
    fb = (b.astype(np.int32) - zb).astype(np.float32)

    def q(v):
        return np.clip(np.rint(v / sy) + zy, 0, 255).astype(np.uint8)

    ref = q(fa * sa + fb * sb)
    fused = [q((fa.astype(np.float64) * np.float64(sa) + (fb * sb)).astype(np.float32)),
             q((fb.astype(np.float64) * np.float64(sb) + (fa * sa)).astype(np.float32))]
    nf = min(int((f != ref).sum()) for f in fused)
    ok = True
    out = os.path.join(tmp, "add_y.npy")
    for isa in ("generic", "avx2", "avx512"):
        r = run([MI, "run", path, "-i", "a=" + pa, "-i", "b=" + pb, "--output", out, "-q",
                 "-t", "1"], {"MI_CPU_ISA": isa, "MI_DEBUG": "quant"})
        y = np.load(out)
        if "1 nodes on int8 kernels" not in r.stderr or not np.array_equal(y, ref):
            ok = False
            print(f"  add fma {isa}: {int((y != ref).sum())} bytes differ from two roundings")
    check(ok and nf > 0, f"add fma: int8 Add == DQ, Add, Q rounded twice on all 65536 byte "
          f"pairs ({nf} differ when fused), generic/avx2/avx512")


def check_gap(tmp):
    """GlobalAveragePool of a quantized tensor (DQ, or a HardSwish/SiLU
    table, ahead of it; Q after it or not) reads the bytes: the same fp32
    means / bytes on every ISA, at 1 and 3 threads, on
    planes below, at and above the 64-pixel step and the 512-pixel block.
    Planes under 64 pixels sum in any order where the table's double sums
    are exact (qplan.c lut_sums_exact); the scale 0.9 SiLU table (entries
    down to ~1e-36) is not, and takes k_sum's order."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(5)
    ok, fused = True, True
    for i, (shape, sc) in enumerate([(s, 0.0371) for s in (
            (2, 5, 7, 7), (1, 8, 23, 29), (1, 3, 1, 1), (2, 4, 40, 40), (1, 6, 8, 8), (1, 2, 3, 21),
            (1, 3, 56, 56), (2, 24, 9, 9), (1, 40, 3, 3), (1, 19, 7, 7), (2, 20, 14, 14))] +
            [((2, 5, 7, 7), 0.9), ((1, 8, 23, 29), 0.9)]):
        for act in ("none", "HardSwish", "SiLU"):
            for tail_q in (False, True):
                x = rng.normal(0.3, 2.0 * sc / 0.0371, shape).astype(np.float32)
                nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"])]
                a = "d"
                if act == "HardSwish":
                    nodes.append(helper.make_node("HardSwish", ["d"], ["a"]))
                    a = "a"
                elif act == "SiLU":
                    nodes += [helper.make_node("Sigmoid", ["d"], ["sg"]),
                              helper.make_node("Mul", ["d", "sg"], ["a"])]
                    a = "a"
                nodes.append(helper.make_node("GlobalAveragePool", [a], ["m"]))
                if tail_q:
                    nodes += [helper.make_node("QuantizeLinear", ["m", "s2", "z2"], ["mq"]),
                              helper.make_node("DequantizeLinear", ["mq", "s2", "z2"], ["y"])]
                else:
                    nodes.append(helper.make_node("Identity", ["m"], ["y"]))
                oshape = [shape[0], shape[1], 1, 1]
                g = helper.make_graph(
                    nodes, "gap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, oshape)],
                    [helper.make_tensor("s", TensorProto.FLOAT, [], [sc]),
                     helper.make_tensor("z", TensorProto.UINT8, [], [97]),
                     helper.make_tensor("s2", TensorProto.FLOAT, [], [0.0023]),
                     helper.make_tensor("z2", TensorProto.UINT8, [], [61])])
                path = os.path.join(tmp, "gap%d-%s-%d.onnx" % (i, act, tail_q))
                onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
                r = run([MI, "run", path, "-q", "--bench", "1", "--profile"])
                fused &= "GlobalAveragePool" in r.stdout and not re.search(
                    r"GlobalAveragePool.*reference", r.stdout) and not re.search(
                    r"^\s*(HardSwish|Sigmoid)\s", r.stdout, re.M)
                for isa in ("generic", "avx2", "avx512"):
                    for t, env in ((1, {}), (3, {})):
                        env = dict(env, MI_CPU_ISA=isa)
                        f = mi_run(path, x, tmp, env, threads=t)
                        # against the same ISA's 1-thread run (each ISA
                        # sums in its own order)
                        if t == 1:
                            u = f
                        if not np.array_equal(f.view(np.uint32), u.view(np.uint32)):
                            ok = False
                            print(f"  gap {shape} {act} q={tail_q} {isa} t={t}: "
                                  f"max diff {np.abs(f - u).max():.3e}")
    check(fused, "gap: GlobalAveragePool of DQ / HardSwish / SiLU planned on the bytes (no table pass left)")
    check(ok, "gap: fused pool the same bit for bit at 1 and 3 threads, generic/avx2/avx512")


def probit(q):
    """z with P(N(0,1) < z) = q (bisection on erfc, as quantize.c)."""
    import math
    lo, hi = -40.0, 40.0
    for _ in range(100):
        z = (lo + hi) / 2
        if 0.5 * math.erfc(-z / math.sqrt(2)) < q:
            lo = z
        else:
            hi = z
    return (lo + hi) / 2


def judged_tail(cs, fresh=100, conf=0.9, margin_z=1.2816):
    """quantize.c's judged(), written again: the normal tail fitted to the
    upper half of the sorted log errors (Blom plotting positions), at the
    quantile a fresh draw of `fresh` inputs keeps with probability conf,
    plus margin_z jackknife standard errors.  Returns (tail, se)."""
    e = np.sort(np.log(np.maximum(1 - np.asarray(cs, dtype=np.float64), 1e-15)))
    n = len(e)
    if n < 16:
        return float(min(cs)), 0.0
    z = probit(conf ** (1.0 / fresh))

    qs = {}

    def fit(s):
        k = len(s)
        m = k // 2
        if k not in qs:
            qs[k] = np.array([probit((i + 1 - 0.375) / (k + 0.25)) for i in range(k - m, k)])
        b, a = np.polyfit(qs[k], s[k - m:], 1)
        return a + b * z

    lj = np.array([fit(np.delete(e, j)) for j in range(n)])
    se = float(np.sqrt((n - 1) / n * ((lj - lj.mean()) ** 2).sum()))
    return 1 - float(np.exp(fit(e) + margin_z * se)), se


def check_holdout(fp32, tmp, mn):
    """--min-cosine's judgement and hold-out path, on the quantizer's own
    300 inputs (seed 1: 200 searched, 100 held out).  A search target
    looser than the final one (--search-target, a test hook) makes
    the search stop early, so the check on all inputs fails, the prefix
    grows and a bisection on all inputs finds the shortest passing prefix.
    Every judgement MI_DEBUG=quant prints is recomputed here from the
    per-input cosines it lists: the tail estimate (normal tail fit +
    jackknife margin) and the verdict (minimum and tail of all inputs, and
    in the final checks of the held-out ones alone, reach the target)."""
    tgt = float("%.10f" % (1 - (1 - mn) / 6))
    loose = float("%.10f" % (1 - (1 - mn) / 1.5))
    q = os.path.join(tmp, "mc-hold.onnx")
    r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", q,
             "--min-cosine", "%.10f" % tgt, "--search-target", "%.10f" % loose],
            env={**os.environ, "MI_DEBUG": "quant"})
    fin = re.findall(r"check on all 300 inputs \(100 held out\), (\d+) units in fp32 \+ (\d+) "
                     r"refinements: (passed|failed)", r.stdout)
    bis = re.findall(r"check on all 300 inputs, (\d+) units in fp32: (passed|failed)", r.stdout)
    mk = re.search(r"after the checks on all inputs: (\d+) units in fp32", r.stdout)
    checked = {}
    for k, nk, v in fin:
        if int(nk) == 0:
            checked[int(k)] = v == "passed"
    for k, v in bis:
        checked[int(k)] = v == "passed"
    k = int(mk.group(1)) if mk else -1
    check(fin and fin[0][2] == "failed" and mk is not None and checked.get(k) is True and
          checked.get(k - 1) is False and
          all(p_ == (kk >= k) for kk, p_ in checked.items()) and "left in fp32" in r.stdout,
          f"--min-cosine {tgt:.10f} (search {loose:.10f}): the check on all inputs fails, the "
          f"bisection on all inputs ends at the shortest passing prefix ({k} units; checked "
          f"{sorted(checked.items())})")
    nj, nhold, bad = recheck_judgements(r.stderr)
    check(nj >= 5 and nhold >= 2 and not bad,
          f"--min-cosine: {nj} judgements ({nhold} with held-out inputs) recomputed: tail fit, "
          f"jackknife margin, verdict {bad[:3]}")


def recheck_judgements(err):
    """Every judgement MI_DEBUG=quant printed in err, recomputed from its
    per-input cosines: (judgements, those with held-out inputs, mismatches)."""
    bad, nj, nhold = [], 0, 0
    for m in re.finditer(r"^judged (\d+) inputs \(held out from (\d+)\): target (\S+) min "
                         r"(\S+) tail (\S+) se (\S+) held-out tail (\S+) se "
                         r"(\S+) (pass|fail):(.*)$", err, re.M):
        n, hold = int(m.group(1)), int(m.group(2))
        t, cmin, tail, hse = (float(m.group(i)) for i in (3, 4, 5, 8))
        cs = [float(x) for x in m.group(10).split()]
        if len(cs) != n:
            bad.append("count")
            continue
        nj += 1
        mytail, myse = judged_tail(cs)
        ok = cmin >= t and mytail >= t
        want = mytail  # the printed tail: the estimates, not the minimum
        if 0 < hold < n:
            nhold += 1
            htail, hse_ = judged_tail(cs[hold:])
            ok = ok and htail >= t
            want = min(want, htail)
        if abs(want - tail) > 1e-12 or abs(min(cs) - cmin) > 1e-15:
            bad.append(f"tail {tail:.10f} != {want:.10f}")
        elif abs(want - t) > 1e-12 and ok != (m.group(9) == "pass"):
            bad.append(f"verdict {m.group(9)} at tail {want:.10f} target {t:.10f}")
    return nj, nhold, bad


def judged_min(cs):
    """What quantize.c's judged() returns: the lower of minimum and tail."""
    return min(min(cs), judged_tail(cs)[0])


def replay(jd_s, jd_a, jd_h, mn_a, s_, t_):
    """--min-cosine's searches replayed on the judgements of each prefix of
    the ranking (jd_s: of the 200 search inputs; jd_a, jd_h: of all 300 and
    of the 100 held-out ones; mn_a: minimum of all 300), search target s_,
    final target t_, no refinement (costs are multiply-adds).  Returns the
    main bisection's steps, the checks on all inputs (growth, then the
    bisection), the final prefix and the features the run exercises."""
    nu = len(jd_s) - 1
    main_, hold, feat = [], [], set()
    lo, hi = 0, nu
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = jd_s[mid] >= s_
        feat.add("search bisection: a passing step" if p else "search bisection: a failing step")
        if not p and hi - mid >= 2:
            feat.add("search bisection: a failing step, then more")
        main_.append((mid, p))
        hi, lo = (mid, lo) if p else (hi, mid)

    def final(k):
        pa, ph = jd_a[k] >= t_, jd_h[k] >= t_
        if mn_a[k] >= t_ and pa != ph:
            feat.add("all inputs and held-out inputs disagree")
        return pa and ph
    hlo, p = -1, False
    while True:
        p = final(hi)
        hold.append((hi, p))
        if p or hi >= nu:
            break
        hlo, hi = hi, hi + (nu - hi + 7) // 8
    if len(hold) > 2:
        feat.add("the prefix grows twice")
    while p and hlo >= 0 and hi - hlo > 1:
        mid = hlo + (hi - hlo) // 2
        pm = final(mid)
        hold.append((mid, pm))
        if pm:
            feat.add("bisection on all inputs: a passing step")
            hi = mid
        else:
            if hi - mid >= 2:
                feat.add("bisection on all inputs: a failing step, then more")
            feat.add("bisection on all inputs: a failing step")
            hlo = mid
    if hlo >= 0 and len(hold) > 1 and not hold[-1][1]:
        feat.add("bisection on all inputs: ends on a failing step")
    return main_, hold, hi, feat


def check_search(fp32, tmp, mn):
    """--min-cosine's searches, replayed: with --list-prefixes (a test
    hook) the quantizer prints each prefix's per-input cosines on all 300
    inputs (seed 1; --cost macs makes the ranking independent of
    timing).  From them this test picks search and final targets whose
    searches take every branch (the search bisection passing and failing,
    the prefix growing, the bisection on all inputs passing and failing
    before its last step, a configuration that passes on all inputs but not
    on the held-out ones or the other way round), predicts every step of
    each, and checks the quantizer took exactly those steps."""
    env = {**os.environ, "MI_DEBUG": "quant"}
    q = os.path.join(tmp, "mc-search.onnx")
    tgt = 1 - (1 - mn) / 6
    r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", q,
             "--min-cosine", repr(tgt), "--cost", "macs", "--list-prefixes"], env=env)
    pre = {int(m.group(1)): [float(x) for x in m.group(2).split()]
           for m in re.finditer(r"^prefix (\d+):(.*)$", r.stderr, re.M)}
    nu = len(pre) - 1
    if nu < 8 or sorted(pre) != list(range(nu + 1)) or any(len(v) != 300 for v in pre.values()):
        check(False, f"--min-cosine: --list-prefixes lists every prefix ({sorted(pre)})")
        return
    jd_s = [judged_min(pre[k][:200]) for k in range(nu + 1)]
    jd_a = [judged_min(pre[k]) for k in range(nu + 1)]
    jd_h = [judged_min(pre[k][200:]) for k in range(nu + 1)]
    mn_a = [min(pre[k]) for k in range(nu + 1)]

    def between(vals):
        # targets half-way between neighbouring judgements: no ties
        v = sorted(set(vals))
        return [(a + b) / 2 for a, b in zip(v, v[1:]) if b - a > 1e-13]
    ss = between(jd_s)
    ts = [t for t in between(jd_a + jd_h + mn_a) if t > jd_a[0]]  # all int8 fails it
    runs = {}
    for s_ in ss:
        for t_ in ts:
            runs[(s_, t_)] = replay(jd_s, jd_a, jd_h, mn_a, s_, t_)
    want = set().union(*(v[3] for v in runs.values())) if runs else set()
    # a few runs that together take every branch (greedy cover)
    pick, got = [], set()
    while runs and len(pick) < 4:
        k = max(runs, key=lambda x: len(runs[x][3] - got))
        if not runs[k][3] - got:
            break
        pick.append(k)
        got |= runs[k][3]
    check(len(want) == 9 and got == want,
          f"--min-cosine: {nu} prefixes listed; {len(pick)} pairs of targets take every branch "
          f"of the searches ({sorted(want)})")
    bad = []
    for s_, t_ in pick:
        main_, hold, k, _ = runs[(s_, t_)]
        r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", q,
                 "--min-cosine", repr(t_), "--cost", "macs", "--search-target", repr(s_)], env=env)
        got_main = [(int(a), b == "passed") for a, b in
                    re.findall(r"^bisection: (\d+) units in fp32: (passed|failed)$", r.stderr, re.M)]
        got_hold = [(int(a), b == "passed") for a, b, c_ in re.findall(
            r"check on all 300 inputs(?: \(100 held out\))?, (\d+) units in fp32(?: \+ (\d+) "
            r"refinements)?: (passed|failed)", r.stdout) for b in [c_]]
        mk = re.search(r"after the checks on all inputs: (\d+) units in fp32", r.stdout)
        got_k = int(mk.group(1)) if mk else (got_hold[0][0] if got_hold else -1)
        nj, _, badj = recheck_judgements(r.stderr)
        if got_main != main_ or got_hold != hold or got_k != k or badj:
            bad.append(f"search {s_!r} final {t_!r}: bisection {got_main} (want {main_}), "
                       f"checks {got_hold} (want {hold}), end {got_k} (want {k}) {badj[:2]}")
    check(pick and not bad,
          f"--min-cosine: {len(pick)} searches replayed step by step from the prefixes' cosines "
          f"{bad[:2]}")


def round_trips(path):
    """Activation tensors of a QDQ file that are only rounded: a
    QuantizeLinear read only by DequantizeLinear nodes whose readers are
    all convs / GEMMs with fp32 weights."""
    import onnx

    g = onnx.load(path).graph
    inits = {i.name for i in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    cons = {}
    for n in g.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    out = []
    for n in g.node:
        if n.op_type != "QuantizeLinear" or n.input[0] in inits:
            continue
        rd = cons.get(n.output[0], [])
        if not rd or any(r.op_type != "DequantizeLinear" for r in rd):
            continue
        fin = [c for r in rd for c in cons.get(r.output[0], [])]
        if fin and all(c.op_type in ("Conv", "Gemm", "MatMul") and c.input[0] in
                       [r.output[0] for r in rd] and not (
                           c.input[1] in prod and prod[c.input[1]].op_type == "DequantizeLinear")
                       for c in fin):
            out.append(n.input[0])
    return out


def check_rt_down(fp32, tmp, mn):
    """--min-cosine leaves no activation tensor quantized that only fp32
    nodes read (a QuantizeLinear -> DequantizeLinear round trip: time and
    error for nothing; --keep-round-trips allows them), and after the search
    tries the units left int8 whose fp32 the cost model predicts faster
    (--no-refine: not), each kept exactly when it holds the target,
    never predicting a slower file.  AVX2 table and kernels
    (MI_CPU_ISA=avx2) on every host, targets from 1/4 to 1/100 of the
    all-int8 error (seed 1)."""
    env = {**os.environ, "MI_CPU_ISA": "avx2"}
    q = os.path.join(tmp, "mc-rt.onnx")
    rts, rts0, sweep, bad = [], [], [], []
    for r_ in (4, 10, 13.35, 30, 100):
        tgt = "%.10f" % (1 - (1 - mn) / r_)
        pred = {}
        for rt, down in (("1", "1"), ("1", "0"), ("0", "0")):
            o = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", q,
                     "--min-cosine", tgt] + (["--keep-round-trips"] if rt == "0" else []) +
                    (["--no-refine"] if down == "0" else []), env=env).stdout
            m = re.search(r"predicted ([0-9.]+) ms at 1 thread", o)
            pred[(rt, down)] = float(m.group(1)) if m else None
            (rts if rt == "1" else rts0).append(len(round_trips(q)))
            for x in re.findall(r"^min-cosine: (?:tensor|weight) .* to fp32 \(-([0-9.]+) ms\): "
                                r"(kept|undone) \(cosine min ([0-9.]+), tail ([0-9.]+)\)$", o, re.M):
                v = min(float(x[2]), float(x[3]))
                sweep.append(x[1])
                if down != "1" or float(x[0]) < 0 or (
                        abs(v - float(tgt)) > 1e-9 and (v >= float(tgt)) != (x[1] == "kept")):
                    bad.append((tgt, rt, down, x))
        if None not in pred.values() and pred[("1", "1")] > pred[("1", "0")] + 1e-3:
            bad.append((tgt, pred))
    check(not any(rts) and any(rts0),
          f"--min-cosine: no round-trip Q -> DQ between fp32 nodes ({rts}; "
          f"with --keep-round-trips {rts0})")
    check(sweep and not bad,
          f"--min-cosine: fp32 trials after the search: {sweep.count('kept')} of {len(sweep)} kept, "
          f"each when it holds the target, none predicting a slower file {bad[:2]}")


def check_reproducible(fp32, tmp, mn):
    """--min-cosine's choice depends on the model and the flags only: its
    costs come from a cost model of the planned steps, not from timing.
    The same search run twice, the second on the process CPU clock
    (MI_PROF_CPU=1) while another process spins, writes the same bytes and
    prints the same unit costs, ranks and per-node predictions
    (MI_DEBUG=quant)."""
    tgt = "%.10f" % (1 - (1 - mn) / 30)
    outs = []
    for hog in (False, True):
        q = os.path.join(tmp, "mc-rep%d.onnx" % hog)
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if hog else None
        try:
            r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", q,
                     "--min-cosine", tgt],
                    env={**os.environ, "MI_DEBUG": "quant", **({"MI_PROF_CPU": "1"} if hog else {})})
        finally:
            if spin:
                spin.kill()
                spin.wait()
        lines = [l for l in r.stderr.splitlines() if l.startswith(("unit ", "node ", "tensor "))]
        with open(q, "rb") as f:
            outs.append((f.read(), lines, "cost model" in r.stdout))
    (b0, l0, m0), (b1, l1, m1) = outs
    diff = [(a, b) for a, b in zip(l0, l1) if a != b]
    check(m0 and m1 and b0 == b1 and l0 == l1 and len(l0) > 20,
          f"--min-cosine {tgt}: the same file and the same {len(l0)} unit costs and per-node "
          f"predictions with a spinning process and the CPU clock ({diff[:1]})")


def check_memo_threads(fp32, tmp, mn):
    """--min-cosine remembers each configuration's per-input cosines and
    runs the evaluation inputs --threads at a time on as many model
    instances.  The hold-out search of check_holdout (refinements, checks
    on all inputs that meet configurations again) writes the same bytes and
    prints the same lines and per-input cosines (MI_DEBUG=quant) at 1, 2
    and 3 threads (batches that straddle the early stop), and the memo is
    used."""
    tgt = float("%.10f" % (1 - (1 - mn) / 6))
    loose = float("%.10f" % (1 - (1 - mn) / 1.5))
    outs = []
    for nt in (1, 2, 3):
        q = os.path.join(tmp, "mc-memo%d.onnx" % nt)
        r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", q,
                 "--min-cosine", "%.10f" % tgt, "--threads", str(nt), "--search-target",
                 "%.10f" % loose], env={**os.environ, "MI_DEBUG": "quant"})
        m = re.search(r"(\d+) inference runs, (\d+) cosines reused", r.stdout)
        lines = [re.sub(r"\d+ at a time, |,? ?\d+ s\)|; \d+ s$", "", l)
                 for l in r.stdout.splitlines() if "inference runs" not in l and "-> " not in l]
        lines += [l for l in r.stderr.splitlines() if l.startswith(("judged ", "unit "))]
        with open(q, "rb") as f:
            outs.append((f.read(), lines, (int(m.group(1)), int(m.group(2))) if m else None))
    (b0, l0, n0), (b1, l1, n1), (b2, l2, n2) = outs
    diff = [(a, b) for a, b in zip(l0, l1 if l1 != l0 else l2) if a != b]
    check(b0 == b1 == b2 and l0 == l1 == l2 and len(l0) > 20 and n0 and n1 and n2 and
          n0[1] > 0 and n1[1] > 0,
          f"--min-cosine: at 1, 2 and 3 threads: the same file and the "
          f"same {len(l0)} lines (runs, reused: {n0} {n1} {n2}; {diff[:1]})")


def check_costfit(fp32, tmp, mn):
    """tools/quant/costfit.py, which fits quantize.c's cost model tables:
    - each int8 ISA's table has a row per context and class of quantize.c,
      in order (a class added to the enum without its row would shift
      every row after it, silently: C zero-fills the rest);
    - it reads the step lines of --cost steps (the quantizer stops
      after the profiles, with an error) and costs each step as the C cost
      model does (the model's ns printed on each line), with the table of
      the int8 ISA: AVX2's for MI_CPU_ISA=avx2, AVX-512 VNNI's for the
      others (generic here, which the step lines name and costfit.py
      refuses to fit); the tables differ on the net's steps, so a wrong
      selection shows, and the classes split after the AVX-512 fit
      (conv3w: the 3x3 stride-1 conv c4) cost as their parent there;
    - its fit recovers a known table from exact synthetic steps."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("costfit",
                                                  os.path.join(ROOT, "tools/quant/costfit.py"))
    cf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cf)
    src = open(cf.QC).read()
    ctxs, clss = cf.names(src)
    cf.BIG = cf.big_of(open(cf.QH).read())
    tables = {}
    for isa in cf.ARRAY:
        try:
            tables[isa] = cf.table_of(src, ctxs, clss, isa)
        except SystemExit as e:
            check(False, f"cost table {isa}: {e}")
            return
        block = src[src.index(cf.BEGIN % isa):src.index(cf.END % isa)]
        tags = re.findall(r"/\* (\w+) \*/", block)
        want = [t for c in ctxs for t in [c] + clss]
        enum = re.search(r"enum \{ (CC_[^}]*)\}", open(cf.QH).read()).group(1).replace("\n", " ").split(",")
        check(tags == want and len([e for e in enum if e.strip()]) == len(clss) + 1,
              f"cost table {isa}: {len(ctxs)} contexts x {len(clss)} classes, rows in the "
              f"order of cm_ctx_name / cm_cls_name and the CC_ enum")
    for isa, tab in (("avx2", "avx2"), ("generic", "avx512vnni")):
        d = os.path.join(tmp, "steps-" + isa)
        os.makedirs(d, exist_ok=True)
        r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o",
                 os.path.join(d, "x.onnx"), "--min-cosine", "%.10f" % (1 - (1 - mn) / 30), "--cost", "steps"],
                env={"MI_CPU_ISA": isa}, ok=False)
        lines = [l for l in r.stderr.splitlines() if l.startswith("step ")]
        with open(os.path.join(d, "net.0.steps"), "w") as f:
            f.write("\n".join(lines) + "\n")
        if isa in cf.ARRAY:
            steps, got = cf.read_steps([d])
        else:
            steps, got = [l for l in lines if l.split()[1:3] != ["1", "q"]], isa
        bad, ncm, ndiff, cls = [], 0, 0, set()
        for l in lines:
            v = l.split()
            st = dict(ctx=v[2], cls=v[4], macs=float(v[5]), el=float(v[6]), wn=float(v[7]))
            a, b = float(v[13]), cf.model_ns(tables[tab], st)
            other = cf.model_ns(tables["avx2" if tab != "avx2" else "avx512vnni"], st)
            ncm += 1
            ndiff += abs(other - b) > 1 + 1e-3 * abs(b)
            cls.add(v[4])
            if abs(a - b) > 0.051 + 1e-4 * abs(a) or v[14:] != [isa]:
                bad.append((l, b))
        check(r.returncode != 0 and "--cost steps" in r.stderr and
              not os.path.exists(os.path.join(d, "x.onnx")) and len(steps) > 20 and
              ncm >= len(steps) and not bad and got == isa and ndiff > 10 and
              "conv3w" in cls,
              f"--cost steps, MI_CPU_ISA={isa}: {len(steps)} steps, stopped before "
              f"writing; costfit.py costs them as quantize.c's cost model with the {tab} table "
              f"({ndiff} steps the other table costs otherwise; {bad[:1]})")
    # exact synthetic steps: the fit gives back the table they came from
    rng = np.random.default_rng(5)
    truth = {("n8", "conv"): [0.002, 0.3, 0.1, 900.0, 0.05], ("a32", "gap"): [4.0, 0.25, 0, 300.0, 0],
             ("q", "other"): [0, 0.2, 0, 0, 0.1]}
    syn = []
    for (ctx, cls), t in truth.items():
        for i in range(40):
            m, e, w = (rng.uniform(1e4, 1e7) if t[0] and cls != "gap" else rng.uniform(8, 512),
                       rng.uniform(1e3, 1e6), rng.uniform(1e2, 1e5) if t[2] else 0)
            syn.append(dict(model="syn", ctx=ctx, op="X", cls=cls, macs=m, el=e, wn=w,
                            ns=float(np.dot(t, [m, e, w, 1, max(e - cf.BIG, 0)])), runs=1))
    fit, _ = cf.fit(syn, ctxs, clss)
    err = max(abs(fit[k][j] - truth[k][j]) / max(abs(truth[k][j]), 1e-3)
              for k in truth for j in range(cf.NCOEF))
    check(err < 1e-6, f"costfit.py fit recovers a known table from exact steps (rel err {err:.1e})")


def check_wclip(fp32, tmp, inits):
    """Weight scales (weight_scales()): --weight-clip 0 max|w| / qmax per
    output channel; =1 the clipping limit r * max|w| (r = 1, 0.99, ... 0.5)
    whose squared rounding error sum (w - s clamp(round(w / s)))^2 is least,
    each weight rounded and clamped to [-qmax, qmax] by that scale (the
    fp32 weights are the file's: --no-equalize)."""
    import onnx
    from onnx import numpy_helper

    wf = {t.name: numpy_helper.to_array(t).astype(np.float32)
          for t in onnx.load(fp32).graph.initializer if t.name.endswith("weight")}
    for bits, qmax in (("7", 63), ("8", 127)):
        got = {}
        for wc in ("0", "1"):
            qc = os.path.join(tmp, f"wclip{wc}-{bits}.onnx")
            run([MI, "quantize", fp32, "--calib-random", "4", "--no-equalize", "--weight-bits",
                 bits, "--weight-clip", wc, "-o", qc])
            got[wc] = inits(qc)
        bad, nclip, nch = [], 0, 0
        for k, w in wf.items():
            w = w.reshape(w.shape[0], -1)
            s0, s1 = got["0"].get(k + "_scale"), got["1"].get(k + "_scale")
            q1 = got["1"].get(k + "_quantized")
            if s0 is None or s1 is None or q1 is None:
                bad.append(f"{k}: not quantized")
                continue
            q1 = q1.reshape(w.shape[0], -1).astype(np.int64)
            for ch in range(w.shape[0]):
                x = w[ch]
                mx = float(np.abs(x).max())

                def err(s):
                    s = np.float32(s)
                    d = x - s * np.clip(np.rint(x / s), -qmax, qmax).astype(np.float32)
                    return float(np.sum(d.astype(np.float64) ** 2))
                grid = [np.float32(mx) / np.float32(qmax)] + [
                    np.float32(mx * (1 - (1 - 0.5) * st / 50) / qmax) for st in range(1, 51)]
                best = min(err(s) for s in grid)
                nch += 1
                nclip += bool(s1[ch] < s0[ch])
                if s0[ch] != np.float32(mx) / np.float32(qmax):
                    bad.append(f"{k}[{ch}]: WCLIP=0 scale {s0[ch]} != max/qmax")
                if not (min(abs(s1[ch] - g) for g in grid) <= 1e-6 * s0[ch] and
                        err(s1[ch]) <= best * (1 + 1e-5) + 1e-30):
                    bad.append(f"{k}[{ch}]: scale {s1[ch]} error {err(s1[ch]):.6e}, "
                               f"least on the grid {best:.6e}")
                want = np.clip(np.rint(x / s1[ch]), -qmax, qmax).astype(np.int64)
                if not np.array_equal(q1[ch], want):
                    bad.append(f"{k}[{ch}]: weights not rounded and clamped by the scale")
        check(not bad and nclip > 0,
              f"--weight-bits {bits}: clipped weight scales least squared rounding error on "
              f"the grid, {nclip} of {nch} channels clipped; --weight-clip 0: max|w|/{qmax} "
              f"{bad[:3]}")


def check_w8(fp32, tmp, c0, mixed8):
    """--min-cosine with --weight-bits mixed: a 7-bit weight the search
    would leave in fp32 tries 8 bits first.  --w8-fallback 1 (w8 units in
    the ranking): the file holds as many weights of 7-bit nodes at 8 bits
    (max |q| above 63) as the quantizer says, some; =2 (after the search):
    the 8-bit trials are kept exactly when they hold the target, and the
    file holds the kept ones at 8 bits, some (and at a third of the error,
    a trial that fails is undone); =0 none.  Each reaches the target, half
    the all-int8 error (c0: its cosine)."""
    import onnx
    from onnx import numpy_helper

    def wide(path):
        return sorted(t.name for t in onnx.load(path).graph.initializer
                      if t.name.endswith("weight_quantized") and t.name[:-len("_quantized")]
                      not in mixed8 and np.abs(numpy_helper.to_array(t).astype(int)).max() > 63)
    for fb, div in (("1", 2), ("2", 2), ("2", 3), ("0", 2)):
        target = 1 - (1 - c0) / div
        q = os.path.join(tmp, "mc-w8fb%s-%d.onnx" % (fb, div))
        o = run([MI, "quantize", fp32, "--calib-random", "16", "-o", q, "--min-cosine",
                 "%.9f" % target, "--w8-fallback", fb]).stdout
        if "--weight-bits mixed" not in o:
            return
        n8 = re.search(r"(\d+) weights at 8 bits instead of 7", o)
        mc = re.search(r"left in fp32: cosine min ([0-9.]+)", o)
        tr = re.findall(r"weight \S+ to 8 bits \(-[0-9.]+ ms\): (kept|undone) "
                        r"\(cosine min ([0-9.]+), tail ([0-9.]+)\)", o)
        w = wide(q)
        ok = (n8 is not None and int(n8.group(1)) == len(w) and
              mc is not None and float(mc.group(1)) >= target)
        if fb == "1":
            ok = ok and len(w) > 0
        elif fb == "2":
            ok = ok and (len(w) > 0 if div == 2 else any(x[0] == "undone" for x in tr))
            ok = ok and len(w) == sum(x[0] == "kept" for x in tr) and all(
                abs(min(float(x[1]), float(x[2])) - target) <= 1e-9 or
                (min(float(x[1]), float(x[2])) >= target) == (x[0] == "kept") for x in tr)
        else:
            ok = ok and not w and not tr
        check(ok, f"--min-cosine {target:.9f}, --w8-fallback {fb}: {len(w)} weights of 7-bit "
              f"nodes at 8 bits {w} ({n8.group(0) if n8 else '?'}), {len(tr)} trials after the "
              f"search, {mc.group(0) if mc else '?'}")


def main():
    import onnx

    tmp = tempfile.mkdtemp(prefix="mi-quant-")
    fp32 = os.path.join(tmp, "net.onnx")
    export(fp32)
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-1, 1, (2, 3, 20, 20)).astype(np.float32) for _ in range(6)]
    ref = [mi_run(fp32, x, tmp) for x in inputs]

    variants = {
        "qdq-per-channel": [],
        "qdq-per-tensor": ["--per-tensor"],
        "qlinear": ["--format", "qlinear"],
        "qdq-percentile": ["--percentile", "99.99"],
        "qdq-minmax": ["--range", "minmax", "--no-bias-correction"],
        "qdq-w7": ["--weight-bits", "7"],
        "qdq-wmixed": ["--weight-bits", "mixed"],
    }
    qout = {}
    have_ort = os.path.exists(ORT_DIR) and subprocess.run(
        ["node", "--version"], capture_output=True).returncode == 0
    if have_ort:
        print("test-quantize: ONNX Runtime's int8 kernels on this CPU: %s" %
              ("exact (VNNI/AMX): compared to 1e-6" if ORT_EXACT else
               "AVX2 without VNNI (16-bit saturating pairs): compared by cosine"))
    for name, extra in variants.items():
        q = os.path.join(tmp, name + ".onnx")
        r = run([MI, "quantize", fp32, "--calib-random", "16", "-o", q] + extra)
        check("quantized" in r.stdout, f"{name}: quantize ran ({r.stdout.strip()})")
        qout[name] = r.stdout
        m = onnx.load(q)
        try:
            onnx.checker.check_model(m)
            check(True, f"{name}: onnx.checker accepts the model")
        except Exception as e:  # noqa
            check(False, f"{name}: onnx.checker: {e}")
        ops = [n.op_type for n in m.graph.node]
        if name == "qlinear":
            check(ops.count("QLinearConv") >= 5, f"{name}: has QLinearConv nodes {ops.count('QLinearConv')}")
        else:
            check(ops.count("QuantizeLinear") >= 5, f"{name}: has QuantizeLinear nodes")
        # the fast path is taken
        r = run([MI, "run", q], {"MI_DEBUG": "quant"})
        mm = re.search(r"int8: (\d+) nodes on int8 kernels", r.stderr)
        check(mm is not None and int(mm.group(1)) == 12,
              f"{name}: 12 nodes (8 conv/gemm, Add, MaxPool, Concat, GlobalAveragePool) planned on int8 kernels ({mm.group(0) if mm else r.stderr.strip()})")
        if name == "qdq-per-channel":
            # an empty batch runs every int8 kernel on nothing: no error
            m0 = onnx.load(q)
            for v in list(m0.graph.input) + list(m0.graph.output):
                v.type.tensor_type.shape.dim[0].dim_value = 0
            del m0.graph.value_info[:]
            q0 = os.path.join(tmp, name + "-batch0.onnx")
            onnx.save(m0, q0)
            r0 = [run([MI, "run", q0, "-q", "-t", str(t)], ok=False) for t in (1, 2)]
            check(all(x.returncode == 0 for x in r0),
                  f"{name}: batch-0 model runs at 1 and 2 threads"
                  f" ({'; '.join(x.stderr.strip() for x in r0 if x.returncode)})")
        outs = {}
        for isa in ("generic", "avx2", "avx512"):
            outs[isa] = [mi_run(q, x, tmp, {"MI_CPU_ISA": isa}) for x in inputs[:3]]
        same = all(np.array_equal(outs["generic"][i], outs[isa][i])
                   for isa in ("avx2", "avx512") for i in range(3))
        check(same, f"{name}: int8 outputs identical on generic/avx2/avx512")
        two = [mi_run(q, x, tmp, threads=2) for x in inputs[:3]]
        check(all(np.array_equal(outs["avx512"][i], two[i]) for i in range(3)),
              f"{name}: int8 outputs identical at 1 and 2 threads")
        fast = [mi_run(q, x, tmp) for x in inputs]
        slow = [mi_run(q, x, tmp, extra=("--reference",)) for x in inputs]
        c = min(cos(f, r_) for f, r_ in zip(fast, ref))
        check(c >= 0.99, f"{name}: cosine(int8, fp32) min {c:.6f} >= 0.99")
        d = max(float(np.abs(f - s).max() / (np.abs(s).max() + 1e-12)) for f, s in zip(fast, slow))
        cs = min(cos(f, s) for f, s in zip(fast, slow))
        check(d < 0.05 and cs > 0.999,
              f"{name}: int8 kernels vs reference QDQ ops: max rel diff {d:.2e}, cosine {cs:.7f}")
        if have_ort:
            # both compute the integer convolutions exactly: equal up to
            # float rounding of the fp32 tail (the reference QDQ ops sum in
            # fp32 and may round a tie the other way, see above)
            check_ort(name, q, inputs[0], fast[0], tmp)

    # the default recipe (MSE-clipped ranges, bias correction) changes the
    # activation scales and the int32 biases of the min/max recipe
    def inits(path):
        from onnx import numpy_helper
        return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}

    # --weight-bits 7: every int8 weight in [-63, 63] with each output
    # channel's largest |w| at 63 (8 bits: 127), and the AVX2 kernels on
    # them (vpmaddubsw where the weights allow) give the int16 kernels'
    # bytes
    # (mixed: 8 bits for the depthwise c2, the Winograd 3x3 c4 and the
    # GEMV fc on 2 rows, 7 for the other convs); the default is mixed where
    # the int8 kernels are AVX2 ones, else 8 (MI_CPU_ISA lowers the ISA)
    mixed8 = ("c2.weight", "c4.weight", "fc.weight")
    dflt_bits = re.search(r"--weight-bits (\w+)", qout["qdq-per-channel"])
    dflt_bits = dflt_bits.group(1) if dflt_bits else "?"
    with open("/proc/cpuinfo") as f:
        flags = set(re.findall(r"\w+", f.read()))
    for isa, want in (("generic", "8"), ("avx2", "mixed")):
        if isa == "avx2" and not {"avx2", "fma"} <= flags:
            continue
        r = run([MI, "quantize", fp32, "--calib-random", "4", "-o", os.path.join(tmp, "wb.onnx")],
                {"MI_CPU_ISA": isa})
        check(f"--weight-bits {want})" in r.stdout,
              f"default --weight-bits on MI_CPU_ISA={isa}: {want} ({r.stdout.strip()})")
    for name, w8 in (("qdq-per-channel", None if dflt_bits == "8" else mixed8), ("qdq-w7", ()),
                     ("qdq-wmixed", mixed8)):
        wq = {k[:-len("_quantized")]: v for k, v in inits(os.path.join(tmp, name + ".onnx")).items()
              if v.dtype == np.int8 and k.endswith("_quantized")}
        want = {k: 127 if w8 is None or k in w8 else 63 for k in wq}
        got = {k: int(np.abs(v.astype(int)).max()) for k, v in wq.items()}
        top = {k: int(np.abs(v.reshape(v.shape[0], -1).astype(int)).max(1).min()) for k, v in wq.items()}
        check(len(wq) == 8 and got == want and all(top[k] >= want[k] - 1 for k in wq),
              f"{name}: 8 int8 weights in range, max |w| {sorted(got.items())}, "
              f"channel maxima down to {min(top.values()) if top else '?'}")
    check_wclip(fp32, tmp, inits)
    q7 = os.path.join(tmp, "qdq-w7.onnx")
    on = [mi_run(q7, x, tmp, {"MI_CPU_ISA": "avx2"}) for x in inputs[:3]]
    off = [mi_run(q7, x, tmp, {"MI_CPU_ISA": "generic"}) for x in inputs[:3]]
    check(all(np.array_equal(a, b) for a, b in zip(on, off)),
          "qdq-w7: AVX2 vpmaddubsw tiles == the generic kernels")
    dflt = inits(os.path.join(tmp, "qdq-per-channel.onnx"))
    mm_ = inits(os.path.join(tmp, "qdq-minmax.onnx"))
    bias = [k for k, v in dflt.items() if v.dtype == np.int32 and k in mm_]
    sc = [k for k, v in dflt.items() if k.endswith("_scale") and v.ndim == 0 and k in mm_]
    check(bias and any(not np.array_equal(dflt[k], mm_[k]) for k in bias),
          f"bias correction changes int32 biases ({len(bias)} biases)")
    check(sc and all(dflt[k] <= mm_[k] * (1 + 1e-6) for k in sc) and
          any(dflt[k] < mm_[k] for k in sc),
          f"--range mse clips activation ranges within min/max ({len(sc)} scales)")

    # --min-cosine: mixed precision.  A target the all-int8 model meets
    # changes nothing; a stricter one (a quarter of its error) leaves some,
    # not all, tensors/weights in fp32, and reaches the target.
    q0 = os.path.join(tmp, "qdq-per-channel.onnx")
    fast = [mi_run(q0, x, tmp) for x in inputs]
    c0 = min(cos(f, r_) for f, r_ in zip(fast, ref))
    qe = os.path.join(tmp, "mc-easy.onnx")
    r = run([MI, "quantize", fp32, "--calib-random", "16", "-o", qe, "--min-cosine", "0.5"])
    with open(q0, "rb") as f0, open(qe, "rb") as f1:
        check(f0.read() == f1.read() and "all int8" in r.stdout,
              "--min-cosine 0.5: the all-int8 model, unchanged")
    target = 1 - (1 - c0) / 4
    qm = os.path.join(tmp, "mc.onnx")
    r = run([MI, "quantize", fp32, "--calib-random", "16", "-o", qm,
             "--min-cosine", "%.9f" % target])
    mm = re.search(r"left in fp32: cosine min ([0-9.]+)", r.stdout)
    check(mm is not None and float(mm.group(1)) >= target,
          f"--min-cosine {target:.9f}: reached on the quantizer's inputs ({mm.group(0) if mm else r.stdout.strip()})")
    ops0 = [n.op_type for n in onnx.load(q0).graph.node]
    ops = [n.op_type for n in onnx.load(qm).graph.node]
    nq0, nq = ops0.count("QuantizeLinear"), ops.count("QuantizeLinear")
    nw0 = sum(1 for t in onnx.load(q0).graph.initializer if t.data_type == onnx.TensorProto.INT8)
    nw = sum(1 for t in onnx.load(qm).graph.initializer if t.data_type == onnx.TensorProto.INT8)
    check(0 < nq < nq0 or 0 < nw < nw0,
          f"--min-cosine: mixed precision ({nq} of {nq0} QuantizeLinear, {nw} of {nw0} int8 weights)")
    check_w8(fp32, tmp, c0, mixed8)
    mix = [mi_run(qm, x, tmp) for x in inputs]
    c = min(cos(f, r_) for f, r_ in zip(mix, ref))
    check(c >= 1 - (1 - c0) / 2,
          f"--min-cosine: 1 - cosine on other inputs {1 - c:.2e} (all int8 {1 - c0:.2e}): at least halved")
    if have_ort:
        check_ort("--min-cosine", qm, inputs[0], mix[0], tmp, tol=1e-5)

    # the search's pieces, on the quantizer's own evaluation inputs
    # (MI_DEBUG=quant lists each unit's measured cost on stderr); seed 1
    # draws 300 inputs whose minimum lies above the tail estimate
    r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", qe + "1",
             "--min-cosine", "0.5"])
    m8 = re.search(r"all int8: cosine min ([0-9.]+) .* tail estimate ([0-9.]+)", r.stdout)
    check(m8 is not None and float(m8.group(2)) < float(m8.group(1)),
          f"--min-cosine: tail estimate below the sample minimum ({m8.group(0) if m8 else r.stdout.strip()})")
    if m8 is not None:
        # a target the sample minimum meets but the estimated minimum of a
        # fresh draw does not: the margin must make the search act
        lo_, mn_ = float(m8.group(2)), float(m8.group(1))
        tgt = float("%.10f" % ((lo_ + mn_) / 2))
        qt_ = os.path.join(tmp, "mc-tail.onnx")
        r = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", qt_,
                 "--min-cosine", "%.10f" % tgt], env={**os.environ, "MI_DEBUG": "quant"})
        with open(qe + "1", "rb") as f0, open(qt_, "rb") as f1:
            check(f0.read() != f1.read() and "left in fp32" in r.stdout,
                  f"--min-cosine {tgt:.10f} (sample min {mn_:.10f}, tail {lo_:.10f}): not all int8")
        # costs are modelled times: the fp32 weight of the conv with the
        # most multiply-adds costs more than that of the node with the fewest
        wc = [(float(m.group(2)), float(m.group(1))) for m in
              re.finditer(r"^unit +\d+ w \S+ +sens \S+ cost +(-?[0-9.]+) us macs ([0-9]+)", r.stderr, re.M)]
        check(len(wc) >= 4 and max(wc)[1] > 4 * max(min(wc)[1], 0.05),
              f"--min-cosine: modelled cost of the largest conv's weight > 4x the smallest node's ({sorted(wc)})")
        # a strict target (1/30 of the error): many units in fp32, so the
        # refinement has units worth returning to int8
        tst = float("%.10f" % (1 - (1 - mn_) / 30))
        out_st = run([MI, "quantize", fp32, "--calib-random", "16", "--seed", "1", "-o", qt_ + "s",
                      "--min-cosine", "%.10f" % tst]).stdout
        mp = [re.search(r"predicted ([0-9.]+) ms at 1 thread \(all int8 ([0-9.]+), all fp32 ([0-9.]+)\); "
                        r"(\d+) of (\d+) refinements kept", o) for o in (out_st, r.stdout)]
        check(all(x is not None and float(x.group(2)) < float(x.group(3)) and
                  float(x.group(1)) >= 0.9 * float(x.group(2)) for x in mp) and
              max(int(x.group(5)) for x in mp) >= 1,
              f"--min-cosine: predicted all int8 < all fp32, mixed not below all int8, refinement tried "
              f"({'; '.join(x.group(0) if x else '?' for x in mp)})")
        # each refinement step is kept exactly when it holds the target
        mr = [(x, tst) for x in re.findall(
            r"refine \d+/\d+: .*: (kept|undone) \(cosine min ([0-9.]+), tail ([0-9.]+)\)", out_st)]
        mr += [(x, tgt) for x in re.findall(
            r"refine \d+/\d+: .*: (kept|undone) \(cosine min ([0-9.]+), tail ([0-9.]+)\)", r.stdout)]
        # (printed with 9 digits: within 1e-9 of the target is a tie)
        ok_ = [abs(min(float(x[1]), float(x[2])) - t) <= 1e-9 or
               (min(float(x[1]), float(x[2])) >= t) == (x[0] == "kept") for x, t in mr]
        check(all(ok_), f"--min-cosine: refinement keeps exactly the steps that hold the target "
              f"({sum(x[0] == 'kept' for x, _ in mr)} of {len(mr)} kept)")

        check_holdout(fp32, tmp, mn_)
        check_search(fp32, tmp, mn_)
        check_rt_down(fp32, tmp, mn_)
        check_reproducible(fp32, tmp, mn_)
        check_memo_threads(fp32, tmp, mn_)
        check_costfit(fp32, tmp, mn_)

    # 5x5/7x7 depthwise kernels, Sigmoid/SiLU/HardSwish/HardSigmoid tables
    fa = os.path.join(tmp, "act.onnx")
    qa = os.path.join(tmp, "act.int8.onnx")
    export_act(fa)
    run([MI, "quantize", fa, "--calib-random", "16", "-o", qa])
    r = run([MI, "run", qa], {"MI_DEBUG": "quant"})
    mm = re.search(r"int8: (\d+) nodes on int8 kernels", r.stderr)
    check(mm is not None and int(mm.group(1)) == 21,
          f"act: 21 nodes (10 conv/gemm, 7 Sigmoid/SiLU/HardSwish/HardSigmoid tables, 2 SE pools, 2 SE gate Muls) planned on int8 kernels ({mm.group(0) if mm else r.stderr.strip()})")
    refa = [mi_run(fa, x, tmp) for x in inputs[:3]]
    fast = [mi_run(qa, x, tmp) for x in inputs[:3]]
    slow = [mi_run(qa, x, tmp, extra=("--reference",)) for x in inputs[:3]]
    gen = [mi_run(qa, x, tmp, {"MI_CPU_ISA": "generic"}) for x in inputs[:3]]
    check(all(np.array_equal(a, b) for a, b in zip(fast, gen)),
          "act: int8 outputs identical on generic/avx512")
    two = [mi_run(qa, x, tmp, threads=2) for x in inputs[:3]]
    check(all(np.array_equal(a, b) for a, b in zip(fast, two)),
          "act: int8 outputs identical at 1 and 2 threads")
    c = min(cos(f, r_) for f, r_ in zip(fast, refa))
    check(c >= 0.99, f"act: cosine(int8, fp32) min {c:.6f} >= 0.99")
    cs = min(cos(f, s_) for f, s_ in zip(fast, slow))
    d = max(float(np.abs(f - s_).max() / (np.abs(s_).max() + 1e-12)) for f, s_ in zip(fast, slow))
    check(d < 0.05 and cs > 0.999,
          f"act: int8 kernels vs reference QDQ ops: max rel diff {d:.2e}, cosine {cs:.7f}")
    if have_ort:
        # SiLU/SE/HardSwish nets: the int8 path must compute what ONNX
        # Runtime computes on the same QDQ file (on EfficientNet-B0 both agree
        # bit for bit, while the reference QDQ ops' fp32 sums round a few
        # requantization ties differently and a deep random net amplifies it)
        check_ort("act", qa, inputs[0], fast[0], tmp)

    # SE gate Mul writing C4: same bytes as the planar path and as ORT; after
    # a Relu (no table) the pool and the Mul read the DequantizeLinear's bytes
    for stride, act in ((1, "hardswish"), (2, "hardswish"), (1, "relu"), (2, "relu")):
        fs = os.path.join(tmp, "se%d%s.onnx" % (stride, act))
        qs = os.path.join(tmp, "se%d%s.int8.onnx" % (stride, act))
        export_se(fs, stride, act)
        run([MI, "quantize", fs, "--calib-random", "8", "-o", qs])
        fast = mi_run(qs, inputs[0], tmp)
        gen = mi_run(qs, inputs[0], tmp, {"MI_CPU_ISA": "generic"})
        check(np.array_equal(fast, gen),
              f"se{stride} {act}: gate Mul with C4 output == generic ISA")
        prof = run([MI, "run", qs, "-q", "--bench", "1", "--profile"]).stdout
        check(not re.search(r"^\s*(DequantizeLinear|HardSwish)\s", prof, re.M) and
              len(re.findall(r"^\s*QuantizeLinear\s+1\s", prof, re.M)) == 1,
              f"se{stride} {act}: no DequantizeLinear or fp32 table left, one QuantizeLinear (the input's)")
        if have_ort:
            check_ort(f"se{stride} {act}", qs, inputs[0], fast, tmp)

    # C4 between convs with two readers and through a Concat: same bytes as
    # the planar path, the generic ISA, 2 threads and ORT
    ff = os.path.join(tmp, "fire.onnx")
    qf = os.path.join(tmp, "fire.int8.onnx")
    export_fire(ff)
    run([MI, "quantize", ff, "--calib-random", "8", "-o", qf])
    fast = mi_run(qf, inputs[0], tmp)
    gen = mi_run(qf, inputs[0], tmp, {"MI_CPU_ISA": "generic"})
    two = mi_run(qf, inputs[0], tmp, threads=2)
    check(np.array_equal(fast, gen) and np.array_equal(fast, two),
          "fire: C4 MaxPool/squeeze/Concat == generic ISA == 2 threads")
    if have_ort:
        check_ort("fire", qf, inputs[0], fast, tmp)

    rf = os.path.join(tmp, "res.onnx")
    qr = os.path.join(tmp, "res.int8.onnx")
    export_res(rf)
    run([MI, "quantize", rf, "--calib-random", "8", "-o", qr])
    fast = mi_run(qr, inputs[0], tmp)
    gen = mi_run(qr, inputs[0], tmp, {"MI_CPU_ISA": "generic"})
    two = mi_run(qr, inputs[0], tmp, threads=2)
    check(np.array_equal(fast, gen) and np.array_equal(fast, two),
          "res: C4 through Add/table == generic ISA == 2 threads")
    if have_ort:
        check_ort("res", qr, inputs[0], fast, tmp)

    # over 2 and 3 threads (the parallel-for's range claiming and the
    # elementwise splits)
    for path, name in ((q, "qdq"), (qa, "act"), (qf, "fire"), (qr, "res")):
        one = mi_run(path, inputs[0], tmp)
        split = [mi_run(path, inputs[0], tmp, threads=t) for t in (2, 3)]
        check(all(np.array_equal(one, o) for o in split),
              f"{name}: 2 and 3 threads == 1 thread")
    # the same on the other ISAs' kernels (SE gate and table pixel ranges)
    for isa in ("avx2", "generic"):
        env = {"MI_CPU_ISA": isa}
        one = mi_run(qa, inputs[0], tmp, env)
        split = mi_run(qa, inputs[0], tmp, env, threads=3)
        check(np.array_equal(one, split), f"act: 3 threads == 1 thread ({isa})")
    check_qdq_standalone(tmp)
    check_add_fma(tmp)
    check_gap(tmp)
    check_se_ties(tmp)
    check_se_c4(tmp)
    check_act_ranges(tmp)

    # bad input: one line, non-zero exit, no crash
    bad = os.path.join(tmp, "bad.onnx")
    with open(bad, "wb") as f:
        f.write(b"\x08\x07garbage" * 10)
    for args, what in [
        ([MI, "quantize", os.path.join(tmp, "missing.onnx"), "--calib-random", "2", "-o", bad + "2"], "missing model"),
        ([MI, "quantize", bad, "--calib-random", "2", "-o", bad + "2"], "garbage model"),
        ([MI, "quantize", fp32, "--calib", os.path.join(tmp, "nodir"), "-o", bad + "2"], "missing calib dir"),
        ([MI, "quantize", fp32, "--calib-random", "0", "-o", bad + "2"], "zero calibration runs"),
        ([MI, "quantize", fp32, "--calib-random", "2"], "no output"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--format", "x"], "bad format"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--range", "x"], "bad range"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--min-cosine", "1.5"], "bad min-cosine"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--weight-bits", "6"], "bad weight-bits"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--isa", "sse9"], "bad isa"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--cost", "guess"], "bad cost"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--weight-clip", "3"], "bad weight-clip"),
        ([MI, "quantize", fp32, "--calib-random", "2", "-o", bad + "2", "--search-target", "0"], "bad search-target"),
    ]:
        r = run(args, ok=False)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        check(r.returncode not in (0,) and r.returncode < 128 and len(lines) >= 1,
              f"bad input ({what}): exit {r.returncode}, '{lines[0] if lines else ''}'")
    print(f"{len(failures)} failures")
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"files kept in {tmp}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
