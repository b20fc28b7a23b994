#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Export seeded, randomly initialized test networks to ONNX.

For every model NAME this writes, into --out (default build/models):

  NAME.onnx          the network, eval mode, opset 13 (by default)
  NAME.input.npy     a seeded float32 input of the model's input shape,
                     uniform in [-1, 1)
  NAME.output.npy    PyTorch's output for that input (the reference)
  NAME.json          what was exported (shape, seed, opset, versions); used
                     as the cache key: a model is re-exported only when this
                     differs or the script is newer than the model.

Weights are torch's default initialization under torch.manual_seed(seed);
BatchNorm affine parameters are randomized, and the running statistics are
then set from a few seeded random batches (see calibrate_norms: with purely
random statistics a deep CNN's output hardly depends on its input), so they
are far from mean 0 / var 1 and folding BatchNorm into the preceding layer
is really exercised (default stats would make a broken fold invisible).

Run with Debian's python (/usr/bin/python3: torch 1.13, torchvision 0.14,
onnx 1.12):

  tools/models/export.py --list
  tools/models/export.py --out build/models --only resnet18,transformer
  tools/models/export.py --only resnet50 --batch 2 --size 160
  tools/models/export.py --out build/models/fused --fold-bn
"""

import argparse
import json
import os
import sys
import time

MODELS = {}


def model(name, kind="image", desc=""):
    def deco(fn):
        MODELS[name] = {"build": fn, "kind": kind, "desc": desc}
        return fn
    return deco


def tv():
    import torchvision.models as m
    return m


@model("resnet18", desc="torchvision ResNet-18")
def _resnet18(args):
    return tv().resnet18(weights=None)


@model("resnet50", desc="torchvision ResNet-50")
def _resnet50(args):
    return tv().resnet50(weights=None)


@model("mobilenet_v2", desc="torchvision MobileNetV2")
def _mobilenet_v2(args):
    return tv().mobilenet_v2(weights=None)


@model("mobilenet_v3_small", desc="torchvision MobileNetV3-Small")
def _mobilenet_v3_small(args):
    return tv().mobilenet_v3_small(weights=None)


@model("efficientnet_b0", desc="torchvision EfficientNet-B0")
def _efficientnet_b0(args):
    return tv().efficientnet_b0(weights=None)


@model("squeezenet1_1", desc="torchvision SqueezeNet 1.1")
def _squeezenet1_1(args):
    return tv().squeezenet1_1(weights=None)


@model("shufflenet_v2_x1_0", desc="torchvision ShuffleNetV2 x1.0")
def _shufflenet_v2(args):
    return tv().shufflenet_v2_x1_0(weights=None)


@model("transformer", kind="sequence",
       desc="nn.TransformerEncoder (d_model 128, 4 heads, 2 layers, GELU)")
def _transformer(args):
    import torch.nn as nn

    class Encoder(nn.Module):
        """Token features -> 2-layer Transformer encoder -> LayerNorm."""

        def __init__(self, d_model, nhead, layers):
            super().__init__()
            layer = nn.TransformerEncoderLayer(
                d_model, nhead, dim_feedforward=4 * d_model, dropout=0.1,
                activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(
                layer, layers, norm=nn.LayerNorm(d_model),
                enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)

    return Encoder(args.d_model, args.heads, args.layers)


def tv_classifiers():
    """Every torchvision classification model name (torchvision >= 0.14)."""
    import torchvision
    m = torchvision.models
    if not hasattr(m, "list_models"):
        return []
    return [n for n in m.list_models(module=m)
            if not n.startswith("quantized")]


def add_torchvision(name):
    """Register any other torchvision classification model on demand."""
    if name in MODELS or name not in tv_classifiers():
        return name in MODELS

    def build(args):
        import torchvision
        kw = {"weights": None}
        if name in ("googlenet", "inception_v3"):
            kw["aux_logits"] = False
            kw["init_weights"] = True
        return torchvision.models.get_model(name, **kw)

    MODELS[name] = {"build": build, "kind": "image",
                    "desc": "torchvision %s (not in the standard set)" % name}
    return True


def randomize_norms(net, torch):
    """Give every BatchNorm non-trivial affine params and running stats."""
    import torch.nn as nn
    with torch.no_grad():
        # Some heads are zero-initialized (torchvision's ViT): the output
        # would be constant and any comparison of it vacuous.
        for p in net.parameters():
            if p.dim() >= 2 and not bool(p.ne(0).any()):
                nn.init.xavier_uniform_(p)
        for mod in net.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                n = mod.num_features
                mod.weight.copy_(torch.empty(n).uniform_(0.5, 1.5))
                mod.bias.copy_(torch.empty(n).normal_(0.0, 0.1))
                mod.running_mean.copy_(torch.empty(n).normal_(0.0, 0.1))
                mod.running_var.copy_(torch.empty(n).uniform_(0.5, 1.5))
            elif isinstance(mod, nn.LayerNorm) and mod.elementwise_affine:
                n = mod.weight.numel()
                mod.weight.copy_(torch.empty(n).uniform_(0.5, 1.5)
                                 .view_as(mod.weight))
                mod.bias.copy_(torch.empty(n).normal_(0.0, 0.1)
                               .view_as(mod.bias))


def input_shape(name, args):
    if MODELS[name]["kind"] == "sequence":
        return (args.batch, args.seq, args.d_model)
    return (args.batch, 3, args.size, args.size)


def meta_for(name, args, torch, torchvision, onnx):
    return {
        "name": name,
        "desc": MODELS[name]["desc"],
        "input_shape": list(input_shape(name, args)),
        "seed": args.seed,
        "opset": args.opset,
        "fold_bn": args.fold_bn,
        "input": "uniform(-1,1)",
        "bn_calib": [args.calib_steps, args.calib_batch],
        "dynamic_batch": args.dynamic_batch,
        "model_args": ({"d_model": args.d_model, "heads": args.heads,
                        "layers": args.layers}
                       if MODELS[name]["kind"] == "sequence" else {}),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "onnx": onnx.__version__,
    }


def up_to_date(out, name, meta):
    paths = [os.path.join(out, name + ext)
             for ext in (".onnx", ".input.npy", ".output.npy", ".json")]
    if not all(os.path.exists(p) for p in paths):
        return False
    try:
        with open(paths[3]) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    old.pop("export_seconds", None)
    if old != meta:
        return False
    script = os.path.getmtime(os.path.abspath(__file__))
    return all(os.path.getmtime(p) >= script for p in paths)


def calibrate_norms(net, name, args, torch):
    """Set BatchNorm running statistics from seeded random data.

    With random weights and random (or default) running statistics, deep
    CNNs map every input to nearly the same output: the input-dependent part
    of the output shrinks layer by layer below float precision, and a test
    of that output (or of its int8 version) compares constants.  Running
    the network with BatchNorm in training mode over a few seeded batches
    (cumulative average) makes each BatchNorm normalize what it really sees, as in a
    trained network, so the output depends on the input.  The statistics
    are still far from mean 0 / variance 1, so BN folding stays exercised.
    """
    import torch.nn as nn
    bns = [m for m in net.modules()
           if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    gen = torch.Generator().manual_seed(args.seed + 7)
    shape = (args.calib_batch,) + tuple(input_shape(name, args)[1:])
    # Only BatchNorm in training mode: dropout and stochastic depth
    # (EfficientNet) must not distort the statistics.
    net.eval()
    for m in bns:
        m.train()
    with torch.no_grad():
        for _ in range(args.calib_steps):
            net(torch.empty(shape).uniform_(-1.0, 1.0, generator=gen))
    for m in bns:
        m.momentum = 0.1


def build_net(name, args, torch):
    """The seeded eval-mode network NAME (the same weights on every call)."""
    torch.manual_seed(args.seed)
    net = MODELS[name]["build"](args)
    randomize_norms(net, torch)
    if args.calib_steps > 0:
        calibrate_norms(net, name, args, torch)
    return net.eval()


def default_args(**kw):
    """export.py's defaults as an argparse namespace (for other scripts)."""
    args = parser().parse_args([])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def export_one(name, args, torch, np, onnx, meta):
    out = args.out
    net = build_net(name, args, torch)

    rng = np.random.default_rng(args.seed)
    # Same distribution as the BatchNorm calibration data (and as
    # `metainfer quantize --calib-random`): a random-weight network is only
    # well-conditioned on the data its statistics come from.
    x = rng.uniform(-1.0, 1.0, input_shape(name, args)).astype(np.float32)
    xt = torch.from_numpy(x)

    t0 = time.time()
    with torch.no_grad():
        ref = net(xt).numpy().astype(np.float32)

    path = os.path.join(out, name + ".onnx")
    tmp = path + ".tmp"
    dyn = None
    if args.dynamic_batch:
        dyn = {"input": {0: "batch"}, "output": {0: "batch"}}
    # Traced with autograd enabled: under no_grad, torch 1.13's
    # TransformerEncoderLayer takes its fused "fast path"
    # (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
    # By default BatchNormalization stays in the graph (TrainingMode.PRESERVE
    # on an eval-mode model exports inference-mode BatchNormalization), so the
    # runtime's own BN folding is what gets tested; --fold-bn lets PyTorch
    # fold it into the convolutions as a plain export does.
    mode = (torch.onnx.TrainingMode.EVAL if args.fold_bn
            else torch.onnx.TrainingMode.PRESERVE)
    with torch.enable_grad():
        torch.onnx.export(net, xt, tmp, opset_version=args.opset,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes=dyn, training=mode,
                          do_constant_folding=True)
    onnx.checker.check_model(onnx.load(tmp))
    os.replace(tmp, path)
    np.save(os.path.join(out, name + ".input.npy"), x)
    np.save(os.path.join(out, name + ".output.npy"), ref)
    meta = dict(meta)
    meta["export_seconds"] = round(time.time() - t0, 2)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return meta["export_seconds"]


def parser():
    ap = argparse.ArgumentParser(
        description="Export seeded random-weight networks to ONNX with a "
                    "seeded input and PyTorch's reference output.")
    ap.add_argument("--list", action="store_true",
                    help="list the models and exit")
    ap.add_argument("--out", default="build/models",
                    help="output directory (default build/models)")
    ap.add_argument("--only", default="",
                    help="comma-separated model names (default: all)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed for weights and input (default 0)")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224,
                    help="image height and width (default 224)")
    ap.add_argument("--seq", type=int, default=64,
                    help="transformer sequence length (default 64)")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="export with a symbolic batch dimension")
    ap.add_argument("--fold-bn", action="store_true",
                    help="let PyTorch fold BatchNorm into Conv at export "
                         "(default: keep BatchNormalization nodes)")
    ap.add_argument("--calib-steps", type=int, default=2,
                    help="batches used to set BatchNorm running statistics "
                         "from seeded data (0: keep them random; default 2)")
    ap.add_argument("--calib-batch", type=int, default=8,
                    help="images per BatchNorm calibration batch (default 8)")
    ap.add_argument("--force", action="store_true",
                    help="re-export even if up to date")
    ap.add_argument("-q", "--quiet", action="store_true")
    return ap


def main():
    args = parser().parse_args()

    if args.list:
        for name, m in MODELS.items():
            print("%-20s %s" % (name, m["desc"]))
        print("(--only also takes any other torchvision classification "
              "model, e.g. googlenet, densenet121, convnext_tiny, vit_b_16)")
        return 0

    names = [n for n in args.only.split(",") if n] or list(MODELS)
    bad = [n for n in names if not add_torchvision(n)]
    if bad:
        print("export.py: unknown model(s): %s (see --list)" % ", ".join(bad),
              file=sys.stderr)
        return 2
    if args.d_model % args.heads:
        print("export.py: --d-model must be a multiple of --heads",
              file=sys.stderr)
        return 2

    try:
        import numpy as np
        import onnx
        import torch
        import torchvision
    except ImportError as e:
        print("export.py: %s (run with /usr/bin/python3; tools/install-deps "
              "installs python3-torch python3-torchvision python3-onnx)" % e,
              file=sys.stderr)
        return 2
    import warnings
    warnings.filterwarnings("ignore")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

    os.makedirs(args.out, exist_ok=True)
    for name in names:
        meta = meta_for(name, args, torch, torchvision, onnx)
        if not args.force and up_to_date(args.out, name, meta):
            if not args.quiet:
                print("%-20s up to date" % name)
            continue
        secs = export_one(name, args, torch, np, onnx, meta)
        if not args.quiet:
            print("%-20s exported %s in %.1fs" %
                  (name, os.path.join(args.out, name + ".onnx"), secs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
