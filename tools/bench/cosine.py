#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Cosine similarity of a (quantized) model's outputs with PyTorch fp32.

Rebuilds benchmark model NAME exactly as tools/models/export.py exports it
(same seed, same weights; checked against the saved reference output),
feeds N seeded random inputs (uniform in [-1, 1) by default, the
distribution `metainfer quantize --calib-random` calibrates with; --dist
normal for standard normal) to PyTorch (fp32) and to
`<runner> MODEL --input x_i.npy --output y_i.npy` (default: metainfer run on
the int8 model), and prints per-input cosine similarities' minimum and mean,
the same for outputs centered on the mean fp32 output (random-weight CNNs
give nearly the same output for every random input, which makes the plain
cosine close to 1 whatever the model computes), and that floor (the plain
cosine between fp32 outputs of different inputs):

  cosine min=<c> mean=<c> centered_min=<c> centered_mean=<c> floor=<c> n=<N> ...

  cosine.py --model resnet18 --int8 build/bench/int8/resnet18.int8.onnx
  cosine.py --model resnet18 --int8 build/models/resnet18.onnx \\
            --runner 'node tools/bench/ort-run.js'      # harness check: 1.0
"""

import argparse
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="export.py model name")
    ap.add_argument("--int8", required=True, help="the ONNX model to test")
    ap.add_argument("--metainfer", default=os.path.join(ROOT, "build",
                                                        "metainfer"))
    ap.add_argument("--runner", default="",
                    help="command instead of '<metainfer> run'")
    ap.add_argument("-n", type=int, default=100, help="inputs (default 100)")
    ap.add_argument("--seed", type=int, default=1000,
                    help="seed of the inputs (default 1000)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=25,
                    help="inputs per batched run (default 25)")
    ap.add_argument("--no-batched", dest="batched", action="store_false",
                    help="one run per input (default: one run with the "
                         "batch dimension set to N, checked against a "
                         "batch-1 run, falling back to one run per input)")
    ap.add_argument("--dist", choices=("uniform", "normal"),
                    default="uniform",
                    help="input distribution: uniform in [-1, 1) (what "
                         "`metainfer quantize --calib-random` calibrates "
                         "with; default) or standard normal")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build",
                                                         "models"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench",
                                                   "cosine"))
    args = ap.parse_args()

    import numpy as np
    import torch
    import export

    if not export.add_torchvision(args.model):
        print("cosine: unknown model %s" % args.model)
        return 2
    runner = (shlex.split(args.runner) if args.runner
              else [args.metainfer, "run"])
    torch.set_num_threads(1)
    eargs = export.default_args()
    net = export.build_net(args.model, eargs, torch)

    # The rebuilt network must be the exported one.
    ref_in = os.path.join(args.models_dir, args.model + ".input.npy")
    ref_out = os.path.join(args.models_dir, args.model + ".output.npy")
    if os.path.exists(ref_in) and os.path.exists(ref_out):
        with torch.no_grad():
            y = net(torch.from_numpy(np.load(ref_in))).numpy()
        r = np.load(ref_out)
        # Not bit-identical: the BatchNorm statistics are computed with
        # another thread count here, which changes float summation order.
        if y.shape != r.shape or np.abs(y - r).max() > 1e-3 * np.abs(r).max():
            print("cosine: rebuilt %s differs from the exported one by %.3g "
                  "(re-run tools/models/export.py)" % (
                      args.model, np.abs(y - r).max() / np.abs(r).max()
                      if y.shape == r.shape else float("inf")))
            return 1

    shape = export.input_shape(args.model, eargs)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.work, exist_ok=True)
    xs = []
    for i in range(args.n):
        if args.dist == "normal":
            xs.append(rng.standard_normal(shape).astype(np.float32))
        else:
            xs.append(rng.uniform(-1.0, 1.0, shape).astype(np.float32))
    refs = []
    with torch.no_grad():
        for i in range(0, args.n, 10):
            y = net(torch.from_numpy(np.concatenate(xs[i:i + 10]))).numpy()
            refs.extend(r.astype(np.float64).ravel() for r in y)

    gots = None
    if args.batched and shape[0] == 1 and args.n > 1:
        gots, why = run_batched(np, runner, args, xs)
        if gots is None:
            print("cosine: batched run not usable (%s); one run per input"
                  % why, file=sys.stderr)
    if gots is None:
        gots = []
        for i, x in enumerate(xs):
            got, err = run_one(np, runner, args, x, args.int8, "one")
            if err:
                print("cosine: run %d: %s" % (i, err))
                return 1
            gots.append(got.ravel())
    for i, (g, r) in enumerate(zip(gots, refs)):
        if g.shape != r.shape or not np.all(np.isfinite(g)):
            print("cosine: input %d: bad output (shape %s)" % (i, g.shape))
            return 1

    cos = [cosine(np, g, r) for g, r in zip(gots, refs)]
    # Random-weight CNNs map different random inputs to nearly the same
    # output, so the plain cosine is close to 1 even for a constant output.
    # Centered: subtract the mean fp32 output over all inputs from both, so
    # only the input-dependent part counts.  Floor: the plain cosine between
    # fp32 outputs of different inputs (what a constant output would score).
    mean = np.mean(refs, axis=0)
    cen = [cosine(np, g - mean, r - mean) for g, r in zip(gots, refs)]
    floor = [cosine(np, refs[i], refs[i - 1]) for i in range(1, len(refs))]
    print("cosine min=%.6f mean=%.6f centered_min=%.6f centered_mean=%.6f "
          "floor=%.6f n=%d dist=%s model=%s"
          % (min(cos), sum(cos) / len(cos), min(cen), sum(cen) / len(cen),
             sum(floor) / len(floor) if floor else float("nan"), len(cos),
             args.dist, args.int8))
    return 0


def run_one(np, runner, args, x, model, tag):
    """Run model on x; returns (output array, None) or (None, error)."""
    xin = os.path.join(args.work, "%s.%s.x.npy" % (args.model, tag))
    yout = os.path.join(args.work, "%s.%s.y.npy" % (args.model, tag))
    np.save(xin, x)
    if os.path.exists(yout):
        os.unlink(yout)
    cmd = runner + [model, "--input", xin, "--output", yout,
                    "--threads", str(args.threads)]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    except OSError as e:
        return None, "cannot run %s: %s" % (cmd[0], e)
    if r.returncode or not os.path.exists(yout):
        tail = r.stdout.decode(errors="replace").strip().splitlines()[-1:]
        return None, "failed: %s" % (tail[0] if tail else "?")
    return np.load(yout).astype(np.float64), None


def run_batched(np, runner, args, xs):
    """All inputs in one run: the model with its batch dimension set to N.

    Used only if it agrees with a batch-1 run on the first input (same
    model, same engine), else the caller falls back to one run per input.
    """
    import onnx
    proto = onnx.load(args.int8)
    outs = []
    for lo in range(0, len(xs), args.chunk):
        chunk = xs[lo:lo + args.chunk]
        n = len(chunk)
        m = onnx.ModelProto()
        m.CopyFrom(proto)
        for vi in list(m.graph.input) + list(m.graph.output):
            dims = vi.type.tensor_type.shape.dim
            if not dims:
                return None, "no static shape on %s" % vi.name
            dims[0].ClearField("dim_param")
            dims[0].dim_value = n
        del m.graph.value_info[:]
        path = os.path.join(args.work, args.model + ".batched.onnx")
        onnx.save(m, path)
        got, err = run_one(np, runner, args, np.concatenate(chunk), path,
                           "batch")
        if err:
            return None, err
        if got.shape[0] != n:
            return None, "output batch %d" % got.shape[0]
        outs.extend(g.ravel() for g in got)
        if lo == 0:
            one, err = run_one(np, runner, args, xs[0], args.int8, "one")
            if err:
                return None, err
            a, b = outs[0], one.ravel()
            if a.shape != b.shape or np.abs(a - b).max() > 1e-4 * max(
                    np.abs(b).max(), 1e-12):
                return None, "batched output differs from the batch-1 run"
    return outs, None


def cosine(np, a, b):
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / den) if den > 0 else 0.0


if __name__ == "__main__":
    sys.exit(main())
