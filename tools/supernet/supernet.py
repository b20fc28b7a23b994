#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Train a switchable supernet on scikit-learn's digits and export one ONNX.

  supernet.py --out DIR [--seed S] [--epochs E] [--latency FILE.json |
              --measure-latency METAINFER] [--configs-onnx]

The network (input "input" [N,1,8,8] float32, pixels 0..1; output "output"
[N,10] logits) is a fixed 3x3 stem, then three switchable layers

  L0: 16 -> 16 channels at 8x8
  L1: 16 -> 32 channels at 8x8, then MaxPool 2 (4x4)
  L2: 32 -> 32 channels at 4x4

and a fixed Flatten + Gemm head.  Every switchable layer has three variants
with the same input and output channel counts:

  0 std    Conv 3x3 + BN + ReLU
  1 dws    depthwise Conv 3x3 + BN + ReLU, pointwise Conv 1x1 + BN + ReLU
  2 group  grouped Conv 3x3 (4 groups) + BN + ReLU, channel shuffle

During training every layer draws a variant per batch by straight-through
Gumbel-softmax (hard one-hot samples) over learnt logits alpha; the loss is
cross-entropy + --lat-weight x the expected latency of the sampled
architecture (softmax(alpha) . latency, normalized by the slowest
configuration).  The first --warmup epochs sample uniformly (alpha frozen)
so that every variant is trained.

Latency table (microseconds per layer and variant), in this order:
  --latency FILE.json          {"layers": [[std, dws, group], ...]} as given;
  --measure-latency METAINFER  each variant exported alone as an ONNX model
                               and timed with `METAINFER run --bench`
                               (median, 1 thread, the training batch);
  neither                      a MAC-count proxy: 1 us per 10 kMAC plus 2 us
                               per node (deterministic, machine-free).
The table used is stored in the model, with its source.

Export: ONE standard ONNX file (opset 13) holding every variant.  Layer l's
output is Sum_k(Mul(branch_k, metainfer.switch.<l>.<k>)) where the
metainfer.switch.* initializers are float [1] one-hot selectors (the
default configuration is the one the learnt alpha prefer); ONNX Runtime
runs it unchanged, MetaInfer prunes the unselected branches
(mi_model_set_config).  BatchNorm is folded into the convolutions.  The
model's metadata_props "metainfer.switch" holds JSON: the layers (name,
channels, variants, selector names, merge node and output tensor, MACs and
latency per variant), the latency table's source, the held-out accuracy of
all 3^L configurations (PyTorch, eval mode) and the default.  With
--metactl TRAINER, metadata_props "metainfer.metactl" also holds the
meta-controller trained on it (tools/supernet/metactl.c).

Files written into --out: supernet.onnx, test_x.npy [N,1,8,8], test_y.npy,
supernet.json (the metadata plus timings); with --configs-onnx also
config_<a><b><c>.onnx per configuration (the same graph with that one-hot
selection in the initializers: the full one-hot-weighted reference).

Deterministic for a seed: single-threaded, seeded data split, sampling and
initialization.
"""

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

VARIANTS = ("std", "dws", "group")
GROUPS = 4
# name, in channels, out channels, spatial size
LAYERS = (("L0", 16, 16, 8), ("L1", 16, 32, 8), ("L2", 32, 32, 4))
STEM_C = 16


def variant_macs(v, cin, cout, hw):
    px = hw * hw
    if v == "std":
        return cin * cout * 9 * px
    if v == "dws":
        return cin * 9 * px + cin * cout * px
    return cin * cout * 9 * px // GROUPS


def variant_nodes(v):
    return {"std": 2, "dws": 4, "group": 5}[v]


def proxy_latency():
    """Deterministic MAC-count proxy: 1 us / 10 kMAC + 2 us per node."""
    return [[round(variant_macs(v, ci, co, hw) / 1e4 + 2 * variant_nodes(v),
                   3) for v in VARIANTS] for _, ci, co, hw in LAYERS]


def build(torch, nn):
    class Shuffle(nn.Module):
        def forward(self, x):
            n, c, h, w = x.shape
            return x.reshape(n, GROUPS, c // GROUPS, h, w).transpose(
                1, 2).reshape(n, c, h, w)

    def cbr(cin, cout, k, groups=1):
        return [nn.Conv2d(cin, cout, k, padding=k // 2, groups=groups,
                          bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    def branch(v, cin, cout):
        if v == "std":
            return nn.Sequential(*cbr(cin, cout, 3))
        if v == "dws":
            return nn.Sequential(*cbr(cin, cin, 3, cin), *cbr(cin, cout, 1))
        return nn.Sequential(*cbr(cin, cout, 3, GROUPS), Shuffle())

    class Supernet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(*cbr(1, STEM_C, 3))
            self.layers = nn.ModuleList(
                nn.ModuleList(branch(v, ci, co) for v in VARIANTS)
                for _, ci, co, _ in LAYERS)
            self.alpha = nn.Parameter(torch.zeros(len(LAYERS), len(VARIANTS)))
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(LAYERS[-1][2] * 4 * 4, 10)

        def forward(self, x, sel):
            """sel: [L, 3] weights (one-hot samples or a fixed config)."""
            x = self.stem(x)
            for li, br in enumerate(self.layers):
                x = sum(sel[li, k] * b(x) for k, b in enumerate(br))
                if li == 1:
                    x = self.pool(x)
            return self.fc(x.flatten(1))

    return Supernet()


def measure_latency(metainfer, batch, workdir):
    """Time each variant alone with `metainfer run --bench` (median)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    rng = np.random.default_rng(0)
    table = []
    for name, ci, co, hw in LAYERS:
        row = []
        for v in VARIANTS:
            g = Graph(numpy_helper, helper)
            x = "x"
            y = g.branch(v, "m", x, ci, co, hw, rand_branch(rng, v, ci, co))
            model = helper.make_model(
                helper.make_graph(
                    g.nodes, "lat",
                    [helper.make_tensor_value_info(
                        "x", TensorProto.FLOAT, [batch, ci, hw, hw])],
                    [helper.make_tensor_value_info(y, TensorProto.FLOAT,
                                                   None)],
                    g.inits),
                opset_imports=[helper.make_opsetid("", 13)])
            path = os.path.join(workdir, "lat_%s_%s.onnx" % (name, v))
            onnx.save(model, path)
            r = subprocess.run([metainfer, "run", path, "--bench", "30",
                                "--threads", "1"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            m = re.search(rb"latency_ms median=([0-9.]+)", r.stdout)
            if r.returncode or not m:
                raise RuntimeError("%s run %s failed: %s" % (
                    metainfer, path, r.stdout.decode(errors="replace")))
            row.append(round(float(m.group(1)) * 1000.0, 3))
        table.append(row)
    return table


def rand_branch(rng, v, ci, co):
    """Random folded weights for a latency-only model."""
    import numpy as np

    def cw(o, i, k):
        return (rng.standard_normal((o, i, k, k)) * 0.1).astype("float32"), \
            np.zeros(o, "float32")
    if v == "std":
        return [cw(co, ci, 3)]
    if v == "dws":
        return [cw(ci, 1, 3), cw(co, ci, 1)]
    return [cw(co, ci // GROUPS, 3)]


class Graph:
    """Minimal ONNX graph builder with stable names."""

    def __init__(self, numpy_helper, helper):
        self.nh, self.h = numpy_helper, helper
        self.nodes, self.inits = [], []

    def init(self, name, arr):
        self.inits.append(self.nh.from_array(arr, name))
        return name

    def node(self, op, name, inputs, **attrs):
        out = name + ".out"
        self.nodes.append(self.h.make_node(op, inputs, [out], name=name,
                                           **attrs))
        return out

    def conv(self, name, x, w, b, groups=1):
        k = w.shape[-1]
        y = self.node("Conv", name, [x, self.init(name + ".w", w),
                                     self.init(name + ".b", b)],
                      kernel_shape=[k, k], pads=[k // 2] * 4, group=groups)
        return self.node("Relu", name + ".relu", [y])

    def branch(self, v, pre, x, ci, co, hw, convs):
        import numpy as np
        if v == "std":
            return self.conv(pre + ".conv", x, *convs[0])
        if v == "dws":
            y = self.conv(pre + ".dw", x, *convs[0], groups=ci)
            return self.conv(pre + ".pw", y, *convs[1])
        y = self.conv(pre + ".gconv", x, *convs[0], groups=GROUPS)
        # channel shuffle: [N, g, C/g, H, W] -> swap g and C/g -> [N, C, H, W]
        s1 = self.init(pre + ".shape5", np.array([0, GROUPS, co // GROUPS,
                                                  hw, hw], dtype=np.int64))
        y = self.node("Reshape", pre + ".split", [y, s1])
        y = self.node("Transpose", pre + ".shuffle", [y], perm=[0, 2, 1, 3, 4])
        s2 = self.init(pre + ".shape4", np.array([0, co, hw, hw],
                                                 dtype=np.int64))
        return self.node("Reshape", pre + ".merge", [y, s2])


def fold(conv, bn):
    """BatchNorm (eval) folded into the preceding bias-free Conv."""
    import numpy as np
    w = conv.weight.detach().numpy().astype(np.float64)
    s = (bn.weight.detach().numpy() /
         np.sqrt(bn.running_var.numpy() + bn.eps)).astype(np.float64)
    b = bn.bias.detach().numpy() - bn.running_mean.numpy() * s
    return (w * s[:, None, None, None]).astype(np.float32), b.astype(np.float32)


def branch_convs(seq):
    mods = list(seq)
    return [fold(mods[i], mods[i + 1]) for i in range(len(mods))
            if mods[i].__class__.__name__ == "Conv2d"]


def export(net, choice, meta, path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    g = Graph(numpy_helper, helper)
    x = g.conv("stem", "input", *branch_convs(net.stem)[0])
    for li, (name, ci, co, hw) in enumerate(LAYERS):
        terms = []
        for k, v in enumerate(VARIANTS):
            pre = "%s.%s" % (name, v)
            y = g.branch(v, pre, x, ci, co, hw,
                         branch_convs(net.layers[li][k]))
            sel = g.init("metainfer.switch.%s.%d" % (name, k),
                         np.array([1.0 if choice[li] == k else 0.0],
                                  dtype=np.float32))
            terms.append(g.node("Mul", "%s.sel%d" % (pre, k), [y, sel]))
        x = g.node("Sum", "metainfer.switch.%s.merge" % name, terms)
        if li == 1:
            x = g.node("MaxPool", "pool", [x], kernel_shape=[2, 2],
                       strides=[2, 2])
    x = g.node("Flatten", "flatten", [x], axis=1)
    w = net.fc.weight.detach().numpy().astype(np.float32)
    b = net.fc.bias.detach().numpy().astype(np.float32)
    nodes_out = "output"
    g.nodes.append(helper.make_node(
        "Gemm", [x, g.init("fc.w", w), g.init("fc.b", b)], [nodes_out],
        name="fc", transB=1))
    graph = helper.make_graph(
        g.nodes, "supernet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                       ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                       ["N", 10])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="metainfer-supernet")
    helper.set_model_props(model, {"metainfer.switch": json.dumps(meta)})
    onnx.checker.check_model(model)
    onnx.save(model, path + ".tmp")
    os.replace(path + ".tmp", path)


def attach_metactl(trainer, path):
    """Train the meta-controller on the exported model (its tables and
    accuracies) and store it as metadata_props["metainfer.metactl"]."""
    import subprocess
    import onnx
    from onnx import helper

    ctl = path + ".metactl"
    out = subprocess.run([trainer, path, "--out", ctl, "--eval", "0"],
                         check=True, capture_output=True, text=True)
    print(out.stdout.strip())
    with open(ctl) as f:
        text = f.read()
    os.remove(ctl)
    model = onnx.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    props["metainfer.metactl"] = text
    del model.metadata_props[:]
    helper.set_model_props(model, props)
    onnx.save(model, path + ".tmp")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=4,
                    help="epochs of uniform sampling first (default 4)")
    ap.add_argument("--lat-weight", type=float, default=0.5,
                    help="weight of the expected-latency term (default 0.5)")
    ap.add_argument("--latency", default="",
                    help="per-layer, per-variant latency table (JSON, us)")
    ap.add_argument("--measure-latency", default="", metavar="METAINFER",
                    help="measure the table with this metainfer binary")
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--metactl", default="", metavar="TRAINER",
                    help="train the meta-controller with this binary "
                         "(build/tools/supernet/metactl-train) and store "
                         "it in the model")
    ap.add_argument("--configs-onnx", action="store_true",
                    help="also write config_<abc>.onnx per configuration")
    args = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(args.seed).permutation(len(y))
    ntest = int(round(len(y) * args.test_fraction))
    te, tr = perm[:ntest], perm[ntest:]
    xtr, ytr, xte, yte = x[tr], y[tr], x[te], y[te]

    if args.latency:
        with open(args.latency) as f:
            table = json.load(f)["layers"]
        source = "file %s" % os.path.basename(args.latency)
    elif args.measure_latency:
        with tempfile.TemporaryDirectory() as tmp:
            table = measure_latency(args.measure_latency, 64, tmp)
        source = "measured: metainfer run --bench 30 --threads 1, batch 64"
    else:
        table = proxy_latency()
        source = "proxy: 1 us per 10 kMAC + 2 us per node (batch 1)"
    if len(table) != len(LAYERS) or any(len(r) != len(VARIANTS)
                                        for r in table):
        print("supernet: latency table must be %d x %d" % (
            len(LAYERS), len(VARIANTS)), file=sys.stderr)
        return 2
    lat = torch.tensor(table, dtype=torch.float32)
    lat_norm = float(lat.max(1).values.sum())

    net = build(torch, nn)
    wparams = [p for n, p in net.named_parameters() if n != "alpha"]
    opt = torch.optim.Adam(wparams, lr=3e-3)
    aopt = torch.optim.Adam([net.alpha], lr=3e-2)
    gen = torch.Generator().manual_seed(args.seed)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    t0 = time.time()
    net.train()
    for ep in range(args.epochs):
        warm = ep < args.warmup
        tau = max(0.5, 2.0 * (0.8 ** max(0, ep - args.warmup)))
        order = torch.randperm(len(yt), generator=gen)
        for i in range(0, len(order), 64):
            idx = order[i:i + 64]
            if warm:
                logits = torch.zeros_like(net.alpha)
            else:
                logits = net.alpha
            # straight-through Gumbel-softmax, seeded through gen
            u = torch.rand(logits.shape, generator=gen).clamp(1e-6, 1 - 1e-6)
            soft = F.softmax((logits - torch.log(-torch.log(u))) / tau, -1)
            hard = F.one_hot(soft.argmax(-1), len(VARIANTS)).float()
            sel = hard - soft.detach() + soft
            opt.zero_grad()
            aopt.zero_grad()
            loss = F.cross_entropy(net(xt[idx], sel), yt[idx])
            if not warm:
                exp_lat = (F.softmax(net.alpha, -1) * lat).sum() / lat_norm
                loss = loss + args.lat_weight * exp_lat
            loss.backward()
            opt.step()
            if not warm:
                aopt.step()
    train_s = time.time() - t0

    net.eval()
    configs = []
    xe = torch.from_numpy(xte)
    with torch.no_grad():
        for choice in itertools.product(range(len(VARIANTS)),
                                        repeat=len(LAYERS)):
            sel = F.one_hot(torch.tensor(choice), len(VARIANTS)).float()
            pred = net(xe, sel).argmax(1).numpy()
            configs.append({
                "choice": list(choice),
                "accuracy": round(float((pred == yte).mean() * 100), 3),
                "latency_us": round(float(sum(table[l][k] for l, k in
                                              enumerate(choice))), 3)})
    default = [int(k) for k in net.alpha.argmax(1)]
    layers = []
    inputs = ["stem.relu.out", "metainfer.switch.L0.merge.out", "pool.out"]
    for li, (name, ci, co, hw) in enumerate(LAYERS):
        layers.append({
            "input": inputs[li],
            "name": name, "in_channels": ci, "out_channels": co,
            "height": hw, "width": hw, "variants": list(VARIANTS),
            "select": ["metainfer.switch.%s.%d" % (name, k)
                       for k in range(len(VARIANTS))],
            "merge": "metainfer.switch.%s.merge" % name,
            "output": "metainfer.switch.%s.merge.out" % name,
            "macs": [variant_macs(v, ci, co, hw) for v in VARIANTS],
            "latency_us": table[li],
            "alpha": [round(float(a), 4) for a in net.alpha[li]]})
    meta = {"version": 1, "layers": layers, "default": default,
            "latency_source": source,
            "dataset": "sklearn digits 8x8, seed %d, %d train / %d test"
                       % (args.seed, len(tr), ntest),
            "configs": configs}
    path = os.path.join(args.out, "supernet.onnx")
    export(net, default, meta, path)
    if args.metactl:
        attach_metactl(args.metactl, path)
    if args.configs_onnx:
        for c in configs:
            export(net, c["choice"], meta, os.path.join(
                args.out, "config_%s.onnx" % "".join(map(str, c["choice"]))))
    np.save(os.path.join(args.out, "test_x.npy"), xte)
    np.save(os.path.join(args.out, "test_y.npy"), yte)
    info = dict(meta, seed=args.seed, epochs=args.epochs,
                train_seconds=round(train_s, 2),
                total_seconds=round(time.time() - t_start, 2))
    with open(os.path.join(args.out, "supernet.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    accs = [c["accuracy"] for c in configs]
    print("supernet: %d epochs in %.1fs; %d configurations, held-out "
          "accuracy %.2f..%.2f%%; default %s; wrote %s"
          % (args.epochs, train_s, len(configs), min(accs), max(accs),
             ",".join(map(str, default)), path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
