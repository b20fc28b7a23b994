#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Refit the cost model of `metainfer quantize --min-cosine` (cm_rate).

The cost model (lib/quant/qcost.c, lib/quant/quantize-impl.h "The cost model") prices each planned
step of the quantizer's five profile models as

    ns = a * multiply-adds (a step without weights: output channels)
         + b * elements + c * weight elements + d + e * elements beyond CM_BIG

per context (n32 a32 n8 a8 q dq) and per operator class (cm_cls_name),
from a table per int8 ISA (mi_quant_isa(): "avx512vnni", "avx2"; the step
lines name the ISA they were timed on, MI_CPU_ISA=avx2 times the AVX2
kernels on an AVX-512 host).  This tool makes the data and fits the table:

  costfit.py dump [-o DIR] [-r N] MODEL.onnx ...
      runs `metainfer quantize MODEL --calib-random 16 --min-cosine 0.99`
      with --cost steps (the steps timed at 1 thread, 10 runs, on
      the process CPU clock: MI_PROF_CPU=1; the quantizer stops after the
      profiles) N times per model and keeps the step lines in
      DIR/MODEL.RUN.steps (--weight-bits B: passed on, DIR/MODEL-wB.RUN.steps;
      the AVX2 fit needs a set with 8: its default weights are mixed, the
      dense int8 convs 7-bit, and conv8 / conv1x1_8 are their 8-bit rows).
  costfit.py fit [--write FILE.c] [-v] DIR|FILE ...
      per step the minimum over the dumps' runs, then per (context, class)
      a non-negative least-squares fit with weights 1/sqrt(ns); prints the
      table, its errors per class and per model, or with --write replaces
      the dumps' ISA's table, between the "cm_rate ISA: begin/end"
      markers of FILE.c.
  costfit.py check DIR|FILE ...
      the errors of the dumps' ISA's table now in lib/quant/qcost_tables.c.

Context and class names are read from qcost_tables.c, so a new class needs
only its name there (and step_class()); refit after a kernel change (see
Documentation/quantization.rst, "Refitting the cost model").
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QC = os.path.join(ROOT, "lib", "quant", "qcost_tables.c")
QH = os.path.join(ROOT, "lib", "quant", "quantize-impl.h")  # CM_BIG
BEGIN, END = "/* cm_rate %s: begin */", "/* cm_rate %s: end */"
# the C array of each ISA's table
ARRAY = {"avx512vnni": "cm_rate_avx512", "avx2": "cm_rate_avx2"}

# per-step constants above this are capped (step overheads are ~0.1-2 us;
# a larger constant comes from few or clustered points)
DMAX = 2000.0
NCOEF = 5          # a b c d e
BIG = 262144.0     # CM_BIG, read from quantize-impl.h
MIN_ROWS = 8       # fewer steps: the class takes its sibling context's row
MIN_ELEMS = 1000   # ... and so does a class whose steps are all tiny
SIBLING = {"n32": "a32", "a32": "n32", "n8": "a8", "a8": "n8"}
# classes split from another (step_model()'s parent[]): a table without
# their rows (none in the context nor its sibling) prices them as the parent
PARENT = {"conv3w": "conv", "gemv": "conv1x1", "conv8": "conv", "conv1x1_8": "conv1x1"}
# standalone QuantizeLinear / DequantizeLinear: fitted on the profiles where
# they sit as in a chosen file, between an int8 and an fp32 node (2: the
# all-int8 model's graph inputs and outputs, 3 and 4: every other node
# int8), not on profile 1's Q -> DQ pairs between two fp32 nodes (other
# layouts: planar int8 both ways, ~2x the time per element)
QDQ_PROFILES = ("2", "3", "4")


def names(src):
    """cm_ctx_name and cm_cls_name of qcost_tables.c."""
    out = []
    for var in ("cm_ctx_name", "cm_cls_name"):
        m = re.search(var + r"\[[A-Z_]*\]\s*=\s*\{([^}]*)\}", src)
        if not m:
            sys.exit("costfit: %s not found in %s" % (var, QC))
        out.append(re.findall(r'"([^"]+)"', m.group(1)))
    return out


def big_of(src):
    """CM_BIG of quantize-impl.h."""
    m = re.search(r"#define CM_BIG ([0-9.e+]+)", src)
    if not m:
        sys.exit("costfit: CM_BIG not found in %s" % QH)
    return float(m.group(1))


def table_of(src, ctxs, clss, isa):
    """The cm_rate table of int8 ISA isa now in qcost_tables.c."""
    i, j = src.find(BEGIN % isa), src.find(END % isa)
    if i < 0 or j < i:
        sys.exit("costfit: markers %s / %s not found" % (BEGIN % isa, END % isa))
    num = r"\s*([-0-9.e+]+)\s*"
    rows = re.findall(r"\{" + ",".join([num] * NCOEF) + r"\}", src[i:j])
    if len(rows) != len(ctxs) * len(clss):
        sys.exit("costfit: the table has %d rows, expected %d" % (len(rows), len(ctxs) * len(clss)))
    return {(ctxs[k // len(clss)], clss[k % len(clss)]): np.array([float(v) for v in r])
            for k, r in enumerate(rows)}


def dump(args):
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, MI_PROF_CPU="1")
    for r in range(args.runs):
        for m in args.models:
            base = os.path.basename(m)[:-5] if m.endswith(".onnx") else os.path.basename(m)
            wb = ["--weight-bits", args.weight_bits] if args.weight_bits else []
            # another weight width: other int8 steps, a model of its own
            base += "-w" + args.weight_bits if args.weight_bits else ""
            t0 = time.time()
            p = subprocess.run([args.bin, "quantize", m, "--calib-random", "16", "--min-cosine",
                                "0.99", "--cost", "steps", "-o", os.path.join(args.out, base + ".tmp.onnx")] + wb,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            steps = [l for l in p.stderr.splitlines() if l.startswith("step ")]
            if "--cost steps" not in p.stderr:
                # the all-int8 model passed (no profiles taken) or an error
                print("%s: no profiles (%s)" % (base, (p.stdout + p.stderr).strip()[-200:]))
                continue
            f = os.path.join(args.out, "%s.%d.steps" % (base, r))
            with open(f, "w") as o:
                o.write("\n".join(steps) + "\n")
            load = os.getloadavg()[0]
            print("%s run %d: %d steps, %.0f s, load %.1f -> %s" %
                  (base, r, len(steps), time.time() - t0, load, f))
            sys.stdout.flush()


def read_steps(paths):
    """Per step (model, profile, context, node, op, n-th): the fields and
    the minimum time over the runs."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".steps"))
        else:
            files.append(p)
    steps = {}
    isas = set()
    for f in files:
        model = os.path.basename(f).split(".")[0]
        seen = collections.Counter()
        for l in open(f):
            v = l.split()
            if not v or v[0] != "step" or len(v) < 11:
                continue
            p, ctx, op, cls = v[1:5]
            macs, el, wn = (float(x) for x in v[5:8])
            calls, ns, x = int(v[8]), float(v[9]), v[10]
            # the int8 ISA (dumps of older binaries: the AVX-512 one)
            isas.add(v[14] if len(v) > 14 else "avx512vnni")
            if calls == 0 or (ctx in ("q", "dq") and p not in QDQ_PROFILES):
                continue
            key = (model, p, ctx, x, op)
            seen[key] += 1
            key += (seen[key],)
            if key in steps:
                steps[key]["ns"] = min(steps[key]["ns"], ns)
                steps[key]["runs"] += 1
            else:
                steps[key] = dict(model=model, ctx=ctx, op=op, cls=cls, macs=macs, el=el, wn=wn,
                                  ns=ns, runs=1)
    if not steps:
        sys.exit("costfit: no step lines in %s" % " ".join(paths))
    if len(isas) > 1:
        sys.exit("costfit: dumps of several int8 ISAs (%s): fit one at a time" %
                 " ".join(sorted(isas)))
    return list(steps.values()), isas.pop()


def nnls(A, b, it=200):
    """min |Ax - b|, x >= 0 (Lawson-Hanson)."""
    n = A.shape[1]
    x = np.zeros(n)
    P = np.zeros(n, bool)
    w = A.T @ (b - A @ x)
    for _ in range(it):
        if P.all() or (w[~P] <= 1e-12 * max(1, abs(w).max())).all():
            break
        P[np.argmax(np.where(P, -np.inf, w))] = True
        while True:
            z = np.zeros(n)
            z[P] = np.linalg.lstsq(A[:, P], b, rcond=None)[0]
            if (z[P] > 0).all():
                x = z
                break
            m = P & (z <= 0)
            alpha = np.min(x[m] / (x[m] - z[m]))
            x = x + alpha * (z - x)
            P &= x > 1e-15
        w = A.T @ (b - A @ x)
    return x


def features(rows, cls):
    X = np.array([[r["macs"], r["el"], r["wn"], 1.0, max(r["el"] - BIG, 0.0)] for r in rows])
    if cls == "gemm":
        X[:, 1] = 0  # multiply-adds and weights, not the (tiny) activations
    return X


def fit(steps, ctxs, clss):
    rows = collections.defaultdict(list)
    for s in steps:
        rows[(s["ctx"], s["cls"])].append(s)
    table = {}
    for key, r in sorted(rows.items()):
        X = features(r, key[1])
        y = np.array([s["ns"] for s in r])
        w = 1.0 / np.sqrt(np.maximum(y, 200.0))
        coef = nnls(X * w[:, None], y * w)
        dmax = DMAX if len(r) >= MIN_ROWS else 0.0
        if coef[3] > dmax:
            k = [0, 1, 2, 4]
            c = nnls(X[:, k] * w[:, None], (y - dmax) * w)
            coef = np.r_[c[:3], dmax, c[3]]
        table[key] = coef
    # a class with (almost) no data in one context: its sibling context's
    # row; an elementwise Mul with tiny data only: the Add of its context
    thin = lambda k: k not in rows or len(rows[k]) < MIN_ROWS or \
        max(s["el"] for s in rows[k]) < MIN_ELEMS
    notes = []
    for ctx in ctxs:
        for cls in clss:
            k, o = (ctx, cls), (SIBLING.get(ctx), cls)
            if k in rows and thin(k) and o in rows and not thin(o):
                table[k] = table[o]
                notes.append("%s %s: %d steps, the row of %s" % (ctx, cls, len(rows[k]), o[0]))
    for ctx in ctxs:
        k = (ctx, "mul")
        if k in rows and max(s["el"] for s in rows[k]) < MIN_ELEMS and (ctx, "add") in table:
            table[k] = table[(ctx, "add")]
            notes.append("%s mul: tiny steps only, the row of add" % ctx)
    return table, notes


def model_ns(table, s):
    """As step_model() in quantize.c: a split class without rows in the
    context and its sibling is its parent; an empty row falls back to the
    sibling context's, then to the Add of the context."""
    z = np.zeros(NCOEF)
    ctx, cls, sib = s["ctx"], s["cls"], SIBLING.get(s["ctx"], s["ctx"])
    if cls in PARENT and not table.get((ctx, cls), z).any() and \
            not table.get((sib, cls), z).any():
        cls = PARENT[cls]
    r = table.get((ctx, cls), z)
    if not r.any():
        r = table.get((sib, cls), z)
    if not r.any() and ctx in SIBLING:
        r = table.get((ctx, "add"), z)
    return float(features([s], s["cls"])[0] @ r)


def report(steps, table, verbose):
    by_cls = collections.defaultdict(list)
    by_model = collections.defaultdict(lambda: [0.0, 0.0])
    for s in steps:
        pr = model_ns(table, s)
        by_cls[(s["ctx"], s["cls"])].append((s, pr))
        by_model[(s["model"], s["ctx"])][0] += s["ns"]
        by_model[(s["model"], s["ctx"])][1] += pr
    print("# per context and class: steps, median and 90th percentile relative error, "
          "sum model/measured")
    for k, v in sorted(by_cls.items()):
        rel = [abs(p - s["ns"]) / max(s["ns"], 200.0) for s, p in v]
        print("#   %-4s %-8s n=%4d  med %.2f  p90 %.2f  sum %.3f  (%.0f us measured)" %
              (k[0], k[1], len(v), np.median(rel), np.percentile(rel, 90),
               sum(p for _, p in v) / max(sum(s["ns"] for s, _ in v), 1),
               sum(s["ns"] for s, _ in v) * 1e-3))
        if verbose:
            for s, p in sorted(v, key=lambda t: -abs(t[1] - t[0]["ns"]))[:5]:
                print("#       %-18s %-18s macs %10.0f el %8.0f w %8.0f  meas %8.0f model %8.0f" %
                      (s["model"], s["op"], s["macs"], s["el"], s["wn"], s["ns"], p))
    print("# per model and context: measured us, model us, ratio")
    for k, v in sorted(by_model.items()):
        print("#   %-20s %-4s %9.1f %9.1f  %.3f" % (k[0], k[1], v[0] * 1e-3, v[1] * 1e-3,
                                                 v[1] / max(v[0], 1)))


def c_table(table, ctxs, clss, isa):
    out = [BEGIN % isa, "static const double %s[CM_NCTX][CC_NCLS][%d] = {" % (ARRAY[isa], NCOEF)]
    for ctx in ctxs:
        out.append("\t{ /* %s */" % ctx)
        for cls in clss:
            c = table.get((ctx, cls), np.zeros(NCOEF))
            out.append("\t\t{ %s }, /* %s */" % (", ".join("%.4g" % v for v in c), cls))
        out.append("\t},")
    out += ["};", END % isa]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    d = sub.add_parser("dump", help="time the steps of the profile models (the int8 ISA: "
                       "the host's, or MI_CPU_ISA's)")
    d.add_argument("-o", "--out", default="build/costfit")
    d.add_argument("-r", "--runs", type=int, default=3, help="runs per model (default 3)")
    d.add_argument("--bin", default=os.path.join(ROOT, "build", "metainfer"))
    d.add_argument("--weight-bits", help="quantize's --weight-bits (the dumps are named "
                   "MODEL-wBITS: the 8-bit dense int8 classes conv8 and conv1x1_8 of AVX2)")
    d.add_argument("models", nargs="+")
    f = sub.add_parser("fit", help="fit the table to dumps")
    f.add_argument("--write", metavar="FILE.c", help="replace the table in FILE.c")
    f.add_argument("-v", "--verbose", action="store_true")
    f.add_argument("dumps", nargs="+")
    c = sub.add_parser("check", help="errors of the current table on dumps")
    c.add_argument("-v", "--verbose", action="store_true")
    c.add_argument("dumps", nargs="+")
    args = ap.parse_args()
    if args.cmd == "dump":
        return dump(args)
    if args.cmd not in ("fit", "check"):
        ap.print_help()
        return 2
    global BIG
    src = open(getattr(args, "write", None) or QC).read()
    ctxs, clss = names(src)
    BIG = big_of(open(QH).read())
    steps, isa = read_steps(args.dumps)
    if isa not in ARRAY:
        sys.exit("costfit: no table for int8 ISA %s in qcost_tables.c" % isa)
    bad = sorted({s["cls"] for s in steps} - set(clss)) + sorted({s["ctx"] for s in steps} -
                                                                  set(ctxs))
    if bad:
        sys.exit("costfit: dumps name %s, not in qcost_tables.c (dumps of an older binary?)" %
                 " ".join(bad))
    print("# %d steps (%s) from %s" % (len(steps), isa,
                                       " ".join(sorted({s["model"] for s in steps}))))
    if args.cmd == "check":
        report(steps, table_of(src, ctxs, clss, isa), args.verbose)
        return 0
    table, notes = fit(steps, ctxs, clss)
    for n in notes:
        print("# " + n)
    report(steps, table, args.verbose)
    text = c_table(table, ctxs, clss, isa)
    if args.write:
        table_of(src, ctxs, clss, isa)  # the markers are there
        i, j = src.index(BEGIN % isa), src.index(END % isa) + len(END % isa)
        with open(args.write, "w") as o:
            o.write(src[:i] + text + src[j:])
        print("# table written to %s" % args.write)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
