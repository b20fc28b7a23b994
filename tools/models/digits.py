#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""A small CNN trained on scikit-learn's digits, for the int8 accuracy target.

  digits.py [--out DIR]                 train (seeded, seconds) and export
  digits.py --eval [--metainfer BIN]    fp32 vs int8 accuracy with metainfer
  digits.py --eval --check              ... and fail if int8 loses > 1 point

Training writes, into --out (default build/models/digits):

  digits.onnx         fp32 model, opset 13, input "input" [N,1,8,8] float32
                      (pixels scaled to 0..1), output "output" [N,10] logits;
                      N = the test-split size (fixed batch)
  test_x.npy          the held-out test split, [N,1,8,8] float32
  test_y.npy          its labels, [N] int64
  output.npy          PyTorch's logits for test_x (reference)
  calib/calib_K.npy   training-split batches of the same shape, for
                      `metainfer quantize --calib DIR`
  digits.json         seed, split sizes, PyTorch's test accuracy

The data set ships with python3-sklearn (no download).  Training is seeded
and single-threaded, so the same weights come out on every run; it is
skipped when the files are newer than this script.

--eval runs `metainfer run digits.onnx` on the test split (fp32 accuracy),
`metainfer quantize digits.onnx --calib calib -o digits.int8.onnx` (unless
--int8 MODEL is given), runs the int8 model, and prints both accuracies;
--ort also evaluates both models with ONNX Runtime (tools/bench/ort-run.js).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def up_to_date(out, meta):
    files = ["digits.onnx", "test_x.npy", "test_y.npy", "output.npy",
             "digits.json"]
    paths = [os.path.join(out, f) for f in files]
    if not all(os.path.exists(p) for p in paths):
        return False
    try:
        with open(paths[-1]) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    if any(old.get(k) != v for k, v in meta.items()):
        return False
    script = os.path.getmtime(os.path.abspath(__file__))
    return all(os.path.getmtime(p) >= script for p in paths)


def train(args):
    import numpy as np
    import torch
    import torch.nn as nn
    from sklearn.datasets import load_digits

    meta = {"seed": args.seed, "epochs": args.epochs,
            "test_fraction": args.test_fraction, "calib_batches": args.calib}
    if not args.force and up_to_date(args.out, meta):
        print("digits: up to date in %s" % args.out)
        return 0

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(args.seed).permutation(len(y))
    ntest = int(round(len(y) * args.test_fraction))
    te, tr = perm[:ntest], perm[ntest:]
    xtr, ytr, xte, yte = x[tr], y[tr], x[te], y[te]

    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),                                      # 4x4
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    lossf = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.time()
    net.train()
    for ep in range(args.epochs):
        order = torch.randperm(len(yt), generator=gen)
        for i in range(0, len(order), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            loss = lossf(net(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        logits = net(torch.from_numpy(xte)).numpy().astype(np.float32)
    acc = float((logits.argmax(1) == yte).mean() * 100)

    os.makedirs(os.path.join(args.out, "calib"), exist_ok=True)
    onnx_path = os.path.join(args.out, "digits.onnx")
    torch.onnx.export(net, torch.from_numpy(xte), onnx_path + ".tmp",
                      opset_version=13, input_names=["input"],
                      output_names=["output"], do_constant_folding=True)
    os.replace(onnx_path + ".tmp", onnx_path)
    np.save(os.path.join(args.out, "test_x.npy"), xte)
    np.save(os.path.join(args.out, "test_y.npy"), yte)
    np.save(os.path.join(args.out, "output.npy"), logits)
    for k in range(args.calib):
        lo = (k * ntest) % len(tr)
        idx = np.arange(lo, lo + ntest) % len(tr)
        np.save(os.path.join(args.out, "calib", "calib_%d.npy" % k),
                xtr[idx])
    meta.update({"train": int(len(tr)), "test": int(ntest),
                 "torch_test_accuracy": round(acc, 3),
                 "train_seconds": round(time.time() - t0, 2)})
    with open(os.path.join(args.out, "digits.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("digits: trained %d epochs in %.1fs, PyTorch test accuracy %.2f%% "
          "(%d test images), wrote %s" % (args.epochs, time.time() - t0, acc,
                                          ntest, onnx_path))
    return 0


def run_model(runner, model, x, out, threads):
    cmd = runner + [model, "--input", x, "--output", out,
                    "--threads", str(threads)]
    if os.path.exists(out):
        os.unlink(out)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode or not os.path.exists(out):
        tail = r.stdout.decode(errors="replace").strip().splitlines()[-1:]
        raise RuntimeError("%s failed: %s" % (" ".join(cmd),
                                              tail[0] if tail else "?"))


def evaluate(args):
    import numpy as np
    d = args.out
    x = os.path.join(d, "test_x.npy")
    y = np.load(os.path.join(d, "test_y.npy"))
    fp32 = os.path.join(d, "digits.onnx")
    int8 = args.int8 or os.path.join(d, "digits.int8.onnx")
    work = os.path.join(d, "eval")
    os.makedirs(work, exist_ok=True)
    if not args.int8:
        if not os.access(args.metainfer, os.X_OK):
            print("digits: %s not built" % args.metainfer)
            return 1
        cmd = [args.metainfer, "quantize", fp32, "--calib",
               os.path.join(d, "calib"), "-o", int8]
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode:
            print("digits: quantize failed: %s\n%s" % (
                " ".join(cmd), r.stdout.decode(errors="replace")))
            return 1

    runners = [("metainfer", [args.metainfer, "run"])]
    if args.ort:
        runners.append(("ort", ["node", os.path.join(ROOT, "tools", "bench",
                                                     "ort-run.js")]))
    ref = np.load(os.path.join(d, "output.npy"))
    torch_acc = float((ref.argmax(1) == y).mean() * 100)
    print("digits: %d test images; PyTorch fp32 accuracy %.2f%%"
          % (len(y), torch_acc))
    status = 0
    for rname, runner in runners:
        acc = {}
        failed = False
        for tag, model in (("fp32", fp32), ("int8", int8)):
            out = os.path.join(work, "%s.%s.npy" % (rname, tag))
            try:
                run_model(runner, model, x, out, args.threads)
            except RuntimeError as e:
                print("digits: %s %s: %s" % (rname, tag, e))
                failed = True
                break
            logits = np.load(out)
            if logits.shape != ref.shape:
                print("digits: %s %s output shape %s, expected %s"
                      % (rname, tag, logits.shape, ref.shape))
                return 1
            acc[tag] = float((logits.argmax(1) == y).mean() * 100)
            if tag == "int8":
                f = np.load(os.path.join(work, "%s.fp32.npy" % rname))
                agree = float((logits.argmax(1) == f.argmax(1)).mean() * 100)
        if failed:
            if rname == "metainfer":
                return 1
            continue
        delta = acc["int8"] - acc["fp32"]
        ok = delta >= -1.0
        print("digits: %-9s fp32 %.2f%%  int8 %.2f%%  (int8 - fp32 = %+.2f "
              "points, top-1 agreement %.2f%%)  %s"
              % (rname, acc["fp32"], acc["int8"], delta, agree,
                 "PASS" if ok else "FAIL (target: within 1 point)"))
        if not ok and rname == "metainfer":
            status = 1
    return status if args.check else 0


def main():
    ap = argparse.ArgumentParser(
        description="Small CNN on scikit-learn's digits for the int8 "
                    "accuracy target.")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "models",
                                                  "digits"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--calib", type=int, default=2,
                    help="number of calibration batches written (default 2)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--eval", action="store_true",
                    help="measure fp32 vs int8 accuracy with metainfer")
    ap.add_argument("--metainfer", default=os.path.join(ROOT, "build",
                                                        "metainfer"))
    ap.add_argument("--int8", default="",
                    help="use this int8 model instead of quantizing")
    ap.add_argument("--ort", action="store_true",
                    help="also evaluate with ONNX Runtime")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check", action="store_true",
                    help="with --eval: exit 1 if int8 is more than 1 point "
                         "below fp32")
    args = ap.parse_args()
    rc = train(args)
    if rc or not args.eval:
        return rc
    return evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
