#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Real-network correctness test: metainfer vs PyTorch.

Exports (cached) a set of seeded random-weight networks with
tools/models/export.py, runs `metainfer run MODEL --input X --output Y` on
each at every requested thread count, and compares Y with PyTorch's output:

    rel = max|Y - ref| / max|ref|      PASS if rel < --tol (default 1e-4)

Prints one PASS/FAIL line per model and thread count and exits non-zero on
any FAIL (or if a run fails).  `metainfer info MODEL` must succeed too, and
every BatchNormalization a Conv/Gemm can absorb (its input is that node's
only reader) must be gone after normalization (the fold is what is being
tested); BNs with nothing to fold into (DenseNet's after a Concat) may
stay.  Before the real runs it checks itself: a reference perturbed by more
than the tolerance must be reported as FAIL,
and shape mismatches and NaNs must fail too, so the test cannot pass
vacuously.

  tools/models/check_networks.py                       # default set
  tools/models/check_networks.py --models resnet18 --threads 1
  tools/models/check_networks.py --runner 'node tools/bench/ort-run.js'
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (export directory under --models-dir, export flags, model names)
DEFAULT_SETS = [
    ("", [], ["resnet18", "mobilenet_v2", "mobilenet_v3_small",
              "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0",
              "transformer"]),
    # What a plain torch.onnx.export produces: BatchNorm already folded.
    ("fused", ["--fold-bn"], ["resnet18", "mobilenet_v2"]),
]


def compare(np, out, ref):
    """Return (ok, rel_err, reason)."""
    if out.shape != ref.shape:
        return False, float("inf"), "shape %s, expected %s" % (
            tuple(out.shape), tuple(ref.shape))
    out = out.astype(np.float64)
    ref = ref.astype(np.float64)
    if not np.all(np.isfinite(out)):
        return False, float("inf"), "non-finite values in output"
    if ref.size < 2 or float(np.std(ref)) == 0.0:
        # A constant reference (e.g. a zero-initialized head) would make the
        # comparison vacuous.
        return False, float("inf"), "degenerate (constant) reference output"
    scale = float(np.max(np.abs(ref)))
    err = float(np.max(np.abs(out - ref)))
    rel = err / scale
    return True, rel, ""


def verdict(np, out, ref, tol):
    ok, rel, why = compare(np, out, ref)
    return (ok and rel < tol), rel, why


def self_test(np, tol):
    """The comparison must reject what it should reject."""
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((1, 1000)).astype(np.float32)
    cases = [
        ("identical", ref.copy(), True),
        ("tiny noise", ref + np.float32(tol * 0.01) * np.abs(ref).max(), True),
        ("one element off by 10*tol",
         _bump(ref, 10 * tol * float(np.abs(ref).max())), False),
        ("scaled by 1.001", ref * np.float32(1.001), False),
        ("wrong shape", ref.reshape(1000, 1), False),
        ("NaN", _bump(ref, float("nan")), False),
    ]
    z = np.zeros_like(ref)
    if verdict(np, z, z, tol)[0]:
        bad.append("a constant reference")
    bad = []
    for name, out, want in cases:
        got, _, _ = verdict(np, out, ref, tol)
        if got != want:
            bad.append(name)
    return bad


def _bump(a, delta):
    b = a.copy()
    b.flat[len(b.flat) // 2] += delta
    return b


def foldable_batchnorms(model):
    """(BatchNormalization nodes, those a Conv/Gemm can absorb): the BN's
    input is written by a Conv or Gemm and read by nothing else.  A BN after
    a Concat or a pool (DenseNet's pre-activation BNs) has nothing to fold
    into and legitimately stays."""
    import onnx
    g = onnx.load(model, load_external_data=False).graph
    producer, readers = {}, {}
    for n in g.node:
        for o in n.output:
            producer[o] = n
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    outs = {o.name for o in g.output}
    bns = [n for n in g.node if n.op_type == "BatchNormalization"]
    fold = 0
    for n in bns:
        x = n.input[0]
        p = producer.get(x)
        if p is not None and p.op_type in ("Conv", "Gemm") and \
                readers.get(x) == 1 and x not in outs:
            fold += 1
    return len(bns), fold


def check_info(metainfer, model, timeout):
    """`metainfer info` must work; every foldable BatchNorm must be folded."""
    try:
        r = subprocess.run([metainfer, "info", model], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    out = r.stdout.decode(errors="replace")
    if r.returncode:
        last = out.strip().splitlines()[-1:] or ["(no output)"]
        return False, "rc %d: %s" % (r.returncode, last[0])
    before, sep, after = out.partition("after normalization")
    if "BatchNormalization" in before:
        if not sep:
            return True, "(no 'after normalization' section to check)"
        m = re.search(r"^\s*BatchNormalization\s+(\d+)", after, re.M)
        left = int(m.group(1)) if m else 0
        total, fold = foldable_batchnorms(model)
        if left > total - fold:
            return False, ("%d BatchNormalization left after normalization, "
                           "%d of %d cannot be folded" %
                           (left, total - fold, total))
        if left:
            return True, ("BatchNormalization folded (%d left: no Conv/Gemm "
                          "to fold into)" % left)
        return True, "BatchNormalization folded"
    return True, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metainfer", default=os.path.join(ROOT, "build",
                                                        "metainfer"))
    ap.add_argument("--runner", default="",
                    help="command used instead of '<metainfer> run' "
                         "(e.g. 'node tools/bench/ort-run.js')")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build",
                                                         "models"))
    ap.add_argument("--models", default="",
                    help="comma-separated names (default: the standard set, "
                         "plus BN-folded resnet18/mobilenet_v2)")
    ap.add_argument("--threads", default="1,2",
                    help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds per run (default 300)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build",
                                                   "check-networks"))
    ap.add_argument("--reference", default="",
                    help="compare against this .npy instead of PyTorch's "
                         "(only with a single model; for demonstrating a "
                         "failure)")
    args = ap.parse_args()

    import numpy as np

    bad = self_test(np, args.tol)
    if bad:
        print("check-networks: self-test FAILED, comparison accepts: %s"
              % ", ".join(bad))
        return 1
    print("check-networks: self-test ok (perturbed outputs are rejected)")

    if args.runner:
        runner = shlex.split(args.runner)
    else:
        if not os.access(args.metainfer, os.X_OK):
            print("check-networks: %s not built (run make)" % args.metainfer)
            return 1
        runner = [args.metainfer, "run"]
    try:
        threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        print("check-networks: bad --threads %r" % args.threads)
        return 2

    if args.models:
        sets = [("", [], [m for m in args.models.split(",") if m])]
    else:
        sets = DEFAULT_SETS

    t0 = time.time()
    for sub, flags, names in sets:
        d = os.path.join(args.models_dir, sub)
        cmd = [sys.executable, os.path.join(HERE, "export.py"), "--out", d,
               "--only", ",".join(names), "-q"] + flags
        r = subprocess.run(cmd)
        if r.returncode:
            print("check-networks: export failed: %s" % " ".join(cmd))
            return 1
    print("check-networks: models ready in %.1fs" % (time.time() - t0))

    os.makedirs(args.work, exist_ok=True)
    fails = 0
    total = 0
    for sub, _, names in sets:
        for name in names:
            base = os.path.join(args.models_dir, sub, name)
            label = (sub + "/" if sub else "") + name
            ref = np.load(args.reference or base + ".output.npy")
            if not args.runner:
                total += 1
                ok, why = check_info(runner[0], base + ".onnx",
                                     args.timeout)
                if not ok:
                    fails += 1
                print("%s %-28s metainfer info%s" % (
                    "PASS" if ok else "FAIL", label,
                    ": " + why if why else ""))
            for t in threads:
                total += 1
                out = os.path.join(args.work, "%s%s.t%d.npy" % (
                    sub + "-" if sub else "", name, t))
                if os.path.exists(out):
                    os.unlink(out)
                cmd = runner + [base + ".onnx", "--input", base + ".input.npy",
                                "--output", out, "--threads", str(t)]
                s = time.time()
                try:
                    r = subprocess.run(cmd, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT,
                                       timeout=args.timeout)
                    rc, log = r.returncode, r.stdout.decode(errors="replace")
                except subprocess.TimeoutExpired:
                    rc, log = -1, "timed out after %ds" % args.timeout
                secs = time.time() - s
                if rc != 0 or not os.path.exists(out):
                    fails += 1
                    last = log.strip().splitlines()[-1:] or ["(no output)"]
                    print("FAIL %-28s threads=%d  run failed (rc %d): %s"
                          % (label, t, rc, last[0]))
                    continue
                try:
                    got = np.load(out)
                except Exception as e:  # a garbled .npy is a failure too
                    fails += 1
                    print("FAIL %-28s threads=%d  unreadable output: %s"
                          % (label, t, e))
                    continue
                ok, rel, why = verdict(np, got, ref, args.tol)
                if not ok:
                    fails += 1
                print("%s %-28s threads=%d  max_abs_err/max_abs=%.3e%s  "
                      "(%.1fs)" % ("PASS" if ok else "FAIL", label, t, rel,
                                   "  " + why if why else "", secs))
    print("check-networks: %d passed, %d failed (tolerance %g) in %.1fs"
          % (total - fails, fails, args.tol, time.time() - t0))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
