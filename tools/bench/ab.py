#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""A/B benchmark of two metainfer builds on the same models.

    tools/bench/ab.py --a OLD/build/metainfer --b build/metainfer \
        [--models resnet18,...] [--threads 1,2] [--rounds 7] [--iters N]

Runs `metainfer run MODEL --threads T --bench N` with build A and build B
alternately (the order flips every round), so both see the same machine
phases, and prints per model and thread count each build's median of the
per-run medians, the ratio B/A of those medians and the median of the
per-round paired ratios (adjacent runs: the steadier figure on a shared
host).  Models are read from --models-dir (as `make models` writes them);
a model one build cannot run is reported with its error line, the others
go on.  This is how a change is compared with what it replaces: two
builds, never a switch in the code.
"""

import argparse
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODELS = ("resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,"
                  "efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,"
                  "transformer")
LAT_RE = re.compile(r"latency_ms\s+median=([0-9.eE+-]+)")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else float("nan")


def geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def run_once(binary, model, threads, iters, timeout):
    cmd = [binary, "run", model, "--threads", str(threads),
           "--bench", str(iters)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout
    m = LAT_RE.search(p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        last = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
        return None, "rc=%d: %s" % (p.returncode, last[0][:160])
    return float(m.group(1)), None


def pick_iters(binary, model, threads, run_ms, timeout):
    lat, err = run_once(binary, model, threads, 3, timeout)
    if lat is None:
        return None, err
    return max(5, min(2000, int(run_ms / max(lat, 1e-3)))), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="metainfer binary A (old)")
    ap.add_argument("--b", required=True, help="metainfer binary B (new)")
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help="comma list of model names or .onnx paths")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build",
                                                         "models"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=0,
                    help="timed iterations per run (0: ~--run-ms per run)")
    ap.add_argument("--run-ms", type=float, default=500)
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()

    for b in (args.a, args.b):
        if not os.access(b, os.X_OK):
            sys.exit("ab.py: %s is not an executable metainfer binary" % b)
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        sys.exit("ab.py: bad --threads '%s' (comma list of integers)"
                 % args.threads)
    if args.rounds < 1:
        sys.exit("ab.py: --rounds must be at least 1")

    print("| model | threads | N | A ms | B ms | B/A | B/A (paired) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios = {t: [] for t in threads}
    for name in args.models.split(","):
        path = name if name.endswith(".onnx") else \
            os.path.join(args.models_dir, name + ".onnx")
        label = os.path.basename(path)[:-5]
        if not os.path.exists(path):
            print("| %s | - | - | - | - | - | missing: %s |" % (label, path))
            continue
        for t in threads:
            iters, err = (args.iters, None) if args.iters else \
                pick_iters(args.a, path, t, args.run_ms, args.timeout)
            if err:
                print("| %s | %d | - | A: %s | | | |" % (label, t, err))
                continue
            runs = {"a": [], "b": []}
            paired = []
            errs = {}
            for r in range(args.rounds):
                order = ("a", "b") if r % 2 == 0 else ("b", "a")
                got = {}
                for k in order:
                    if k in errs:
                        continue
                    lat, e = run_once(getattr(args, k), path, t, iters,
                                      args.timeout)
                    if lat is None:
                        errs[k] = e
                        continue
                    runs[k].append(lat)
                    got[k] = lat
                if "a" in got and "b" in got:
                    paired.append(got["b"] / got["a"])
            if errs:
                print("| %s | %d | %d | %s | | | |" % (
                    label, t, iters,
                    "; ".join("%s: %s" % kv for kv in errs.items())))
                continue
            ma, mb = median(runs["a"]), median(runs["b"])
            ratios[t].append(median(paired))
            print("| %s | %d | %d | %.3f | %.3f | %.3f | %.3f |" % (
                label, t, iters, ma, mb, mb / ma, median(paired)))
            sys.stdout.flush()
    for t in threads:
        if ratios[t]:
            print("\n%d thread(s): geometric mean of paired B/A %.3f over "
                  "%d models; worst %.3f, best %.3f" % (
                      t, geomean(ratios[t]), len(ratios[t]),
                      max(ratios[t]), min(ratios[t])))


if __name__ == "__main__":
    main()
