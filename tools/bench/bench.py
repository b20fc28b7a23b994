#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Side-by-side benchmark: metainfer vs ONNX Runtime on the same models.

For each model and thread count, runs `metainfer run MODEL --bench N` and
`node tools/bench/ort-run.js MODEL --bench N` alternately for several
rounds (the order flips every round), takes each engine's median of the
per-run medians (and, next to it, its best run's median), and records
each process's peak RSS (ru_maxrss from wait4).  Then int8: `metainfer quantize MODEL --calib-random 16
--min-cosine 0.99` (--quantize-args) once per
model, metainfer on the int8 model vs ORT fp32 (from the fp32 rounds) and
ORT on the same QDQ model, plus the cosine similarity of metainfer's int8
outputs with PyTorch's fp32 outputs over seeded inputs
(tools/bench/cosine.py).  Prints the tables and (with --write) writes them
to BENCHMARKS.md.

Every knob has an environment variable so `make bench` can be tuned:

  BENCH_MODELS    comma list (default: the 8 benchmark models)
  BENCH_THREADS   comma list (default 1,2)
  BENCH_ROUNDS    alternating rounds per model and engine (default 5)
  BENCH_ITERS     timed iterations per run; 0 = auto, ~BENCH_RUN_MS per run
  BENCH_RUN_MS    target duration of one run for auto iterations (500)
  BENCH_INT8      0 to skip the int8 part
  BENCH_COSINE_N  inputs for the cosine similarity (default 100)
"""

import argparse
import datetime
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

BENCH_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
                "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0",
                "transformer"]
PRETTY = {"resnet18": "ResNet-18", "resnet50": "ResNet-50",
          "mobilenet_v2": "MobileNetV2",
          "mobilenet_v3_small": "MobileNetV3-Small",
          "efficientnet_b0": "EfficientNet-B0",
          "squeezenet1_1": "SqueezeNet 1.1",
          "shufflenet_v2_x1_0": "ShuffleNetV2 x1.0",
          "transformer": "Transformer enc. (seq 64)"}
CNNS = [m for m in BENCH_MODELS if m != "transformer"]
LAT_RE = re.compile(r"latency_ms\s+median=([0-9.eE+-]+)\s+p90=([0-9.eE+-]+)"
                    r"\s+min=([0-9.eE+-]+)")


def env(name, default):
    v = os.environ.get(name, "")
    return v if v != "" else default


class RunError(Exception):
    pass


def run_measured(cmd, timeout):
    """Run cmd; return (rc, output, None, seconds) (see run_rss for RSS)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    out = b""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return -1, out.decode(errors="replace") + "\ntimed out", 0, \
            time.time() - t0
    return p.returncode, out.decode(errors="replace"), None, time.time() - t0


RSS_WRAP = r'''
import os, sys, resource
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
sys.stdout.flush()
sys.stderr.write("\npeak_rss_kib=%d\n" % ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status) & 0xff)
'''


def run_rss(cmd, timeout):
    """Run cmd under a tiny fork/exec/wait4 wrapper (the child's own
    ru_maxrss, not the python wrapper's); returns (rc, out, rss_kib, s)."""
    rc, out, _, secs = run_measured(
        [sys.executable, "-c", RSS_WRAP] + cmd, timeout)
    m = re.findall(r"peak_rss_kib=(\d+)", out)
    rss = int(m[-1]) if m else 0
    out = re.sub(r"\n?peak_rss_kib=\d+\n?", "\n", out)
    return rc, out, rss, secs


def parse_latency(out):
    m = LAT_RE.findall(out)
    if not m:
        return None
    return tuple(float(x) for x in m[-1])


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def paired(a, b):
    """Median over rounds of a's per-run median / b's in the same round.
    The two runs of a round are adjacent in time, so a host phase that
    lasts longer than a round slows both; None without a common round."""
    rs = [x / y for x, y in zip(a.get("rounds", []), b.get("rounds", []))
          if x is not None and y]
    return median(rs) if rs else None


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    if not xs:
        return float("nan")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


class Engine:
    def __init__(self, name, argv, model=None):
        self.name = name
        self.argv = argv
        self.model = model      # runs this model instead of the one given

    def cmd(self, model, inp, threads, iters):
        c = self.argv + [self.model or model, "--threads", str(threads),
                         "--bench", str(iters)]
        if inp:
            c += ["--input", inp]
        return c


def bench_once(engine, model, inp, threads, iters, timeout, log):
    cmd = engine.cmd(model, inp, threads, iters)
    rc, out, rss, secs = run_rss(cmd, timeout)
    lat = parse_latency(out)
    log.write("$ %s\n%s\n" % (" ".join(shlex.quote(c) for c in cmd),
                              out.strip()))
    log.flush()
    if rc != 0 or lat is None:
        last = out.strip().splitlines()[-1:] or ["(no output)"]
        raise RunError("%s rc=%d: %s" % (engine.name, rc, last[0][:200]))
    return lat, rss


def measure(engines, model, inp, threads, rounds, iters, timeout, log):
    """Alternate the engines for `rounds` rounds; per engine return
    dict(median, p90, min, rss, runs) or dict(error=...)."""
    res = {e.name: {"medians": [], "p90": [], "min": [], "rss": [],
                    "rounds": [None] * rounds}
           for e in engines}
    errors = {}
    for r in range(rounds):
        order = engines if r % 2 == 0 else list(reversed(engines))
        for e in order:
            if e.name in errors:
                continue
            try:
                lat, rss = bench_once(e, model, inp, threads, iters,
                                      timeout, log)
            except RunError as ex:
                errors[e.name] = str(ex)
                continue
            d = res[e.name]
            d["medians"].append(lat[0])
            d["rounds"][r] = lat[0]
            d["p90"].append(lat[1])
            d["min"].append(lat[2])
            d["rss"].append(rss)
    out = {}
    for e in engines:
        d = res[e.name]
        if e.name in errors and not d["medians"]:
            out[e.name] = {"error": errors[e.name]}
            continue
        out[e.name] = {"median": median(d["medians"]),
                       "p90": median(d["p90"]), "min": min(d["min"]),
                       "best": min(d["medians"]),
                       "rss": max(d["rss"]), "runs": len(d["medians"]),
                       "rounds": d["rounds"],
                       "spread": (max(d["medians"]) / min(d["medians"]) - 1
                                  if min(d["medians"]) > 0 else 0)}
        if e.name in errors:
            out[e.name]["partial"] = errors[e.name]
    return out


def auto_iters(ort, model, inp, threads, run_ms, timeout, log):
    """Iterations so one run takes about run_ms, from a short ORT probe."""
    try:
        lat, _ = bench_once(ort, model, inp, threads, 3, timeout, log)
    except RunError:
        return 20
    return int(max(10, min(1000, round(run_ms / max(lat[0], 0.01)))))


def fmt_ms(d):
    if "error" in d:
        return "FAIL"
    return "%.2f" % d["median"]


def fmt_mb(kib):
    return "%.0f" % (kib / 1024.0)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def git_rev():
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always",
                               "--dirty"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL).stdout.decode().strip()
    except OSError:
        return "?"


def node_baseline_rss(ort_js, timeout):
    """Peak RSS of node with onnxruntime-node loaded and no model: the part
    of ORT's figure that is the JavaScript host, not ONNX Runtime."""
    code = ("const p=require('path');const d=[process.env.MI_ORT_DIR&&"
            "p.resolve(process.env.MI_ORT_DIR,'node_modules'),"
            "p.resolve(%r,'../../build/ort/node_modules')].filter(Boolean);"
            "for(const x of d){try{require(p.join(x,'onnxruntime-node'));"
            "break;}catch(e){}}" % ort_js)
    rc, _, rss, _ = run_rss(["node", "-e", code], timeout)
    return rss if rc == 0 else 0


def call_floor(args, engines, log):
    """Latency of a trivial model: each engine's fixed per-call cost."""
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        return {}
    path = os.path.join(args.work, "tiny.onnx")
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)
    out = {}
    for e in engines:
        try:
            lat, _ = bench_once(e, path, None, 1, 2000, 120, log)
            out[e.name] = lat[0]
        except RunError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metainfer", default=os.path.join(ROOT, "build",
                                                        "metainfer"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build",
                                                         "models"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--models", default=env("BENCH_MODELS",
                                            ",".join(BENCH_MODELS)))
    ap.add_argument("--threads", default=env("BENCH_THREADS", "1,2"))
    ap.add_argument("--rounds", type=int, default=int(env("BENCH_ROUNDS",
                                                          "5")))
    ap.add_argument("--iters", type=int, default=int(env("BENCH_ITERS",
                                                         "0")))
    ap.add_argument("--run-ms", type=float,
                    default=float(env("BENCH_RUN_MS", "500")))
    ap.add_argument("--int8", type=int, default=int(env("BENCH_INT8", "1")))
    ap.add_argument("--cosine-n", type=int,
                    default=int(env("BENCH_COSINE_N", "100")))
    ap.add_argument("--cosine-dist", default=env("BENCH_COSINE_DIST",
                                                 "uniform"),
                    choices=("uniform", "normal"))
    ap.add_argument("--quantize-args",
                    # an empty BENCH_QUANTIZE_ARGS means none (all int8)
                    default=os.environ.get("BENCH_QUANTIZE_ARGS",
                                           "--min-cosine 0.99"),
                    help="more `metainfer quantize` options (default: "
                         "mixed precision to the cosine target)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--write", default="",
                    help="write the report (markdown) to this file")
    ap.add_argument("--command", default="",
                    help="command line quoted in the report")
    ap.add_argument("--ort-only", action="store_true",
                    help="benchmark ONNX Runtime alone (harness test)")
    args = ap.parse_args()

    models = [m for m in args.models.split(",") if m]
    threads = [int(t) for t in args.threads.split(",") if t]
    ort_js = os.path.join(HERE, "ort-run.js")
    ort = Engine("ort", ["node", ort_js, "--warmup", "3"])
    mi = Engine("metainfer", [args.metainfer, "run"])
    engines = [ort] if args.ort_only else [mi, ort]
    if not args.ort_only and not os.access(args.metainfer, os.X_OK):
        print("bench: %s not built (run make)" % args.metainfer)
        return 1
    os.makedirs(args.work, exist_ok=True)
    if not args.ort_only:
        # Benchmark a private copy: a rebuild of the tree during the run
        # must not swap the binary under the measurement.
        snap = os.path.join(args.work, "metainfer")
        shutil.copy2(args.metainfer, snap + ".tmp")
        os.replace(snap + ".tmp", snap)
        args.metainfer = snap
        mi.argv[0] = snap

    os.makedirs(args.work, exist_ok=True)
    t_start = time.time()
    started = datetime.datetime.now(datetime.timezone.utc)
    load0 = os.getloadavg()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models",
                                                     "export.py"),
                        "--out", args.models_dir, "--only", ",".join(models),
                        "-q"])
    if r.returncode:
        print("bench: model export failed")
        return 1
    log = open(os.path.join(args.work, "bench.log"), "w")

    # ---- fp32 ----------------------------------------------------------
    fp32 = {}   # (model, threads) -> {engine: stats}
    iters_used = {}
    print("bench: fp32, %d rounds per engine, threads %s (log: %s)"
          % (args.rounds, args.threads, log.name))
    for t in threads:
        for m in models:
            onnx = os.path.join(args.models_dir, m + ".onnx")
            inp = os.path.join(args.models_dir, m + ".input.npy")
            n = args.iters or auto_iters(ort, onnx, inp, t, args.run_ms,
                                         args.timeout, log)
            iters_used[(m, t)] = n
            res = measure(engines, onnx, inp, t, args.rounds, n,
                          args.timeout, log)
            fp32[(m, t)] = res
            line = "  %-20s threads=%d iters=%-4d" % (m, t, n)
            for e in engines:
                d = res[e.name]
                line += "  %s %s" % (e.name, fmt_ms(d) if "error" not in d
                                     else "FAIL(" + d["error"] + ")")
            print(line, flush=True)

    # ---- int8 ----------------------------------------------------------
    int8 = {}     # (model, threads) -> {engine: stats}
    cosine = {}   # model -> (min, mean) or error string
    int8_note = ""
    if args.int8 and not args.ort_only:
        int8_note = run_int8(args, models, threads, mi, ort, iters_used,
                             int8, cosine, log)
    elif not args.int8:
        int8_note = "int8 part skipped (BENCH_INT8=0)."

    base_rss = node_baseline_rss(ort_js, 60)
    floor = call_floor(args, engines, log)
    ended = datetime.datetime.now(datetime.timezone.utc)
    load1 = os.getloadavg()
    report = render(args, models, threads, engines, fp32, int8, cosine,
                    int8_note, iters_used, base_rss, floor, started, ended,
                    load0, load1, time.time() - t_start)
    print()
    print(report)
    if args.write:
        with open(args.write, "w") as f:
            f.write(report)
        print("bench: wrote %s" % args.write)
    log.close()
    return 0


def run_int8(args, models, threads, mi, ort, iters_used, int8, cosine, log):
    """Quantize, benchmark and measure cosine similarity; returns a note."""
    qdir = os.path.join(args.work, "int8")
    os.makedirs(qdir, exist_ok=True)
    # Does `metainfer quantize` exist yet?
    rc, out, _, _ = run_measured([args.metainfer, "quantize", "--help"], 60)
    if rc != 0 and "calib" not in out:
        msg = out.strip().splitlines()[-1:] or ["?"]
        return ("int8 part skipped: `metainfer quantize` is not available "
                "in this build (%s)." % msg[0][:160])
    notes = []
    qmodels = {}
    for m in models:
        src = os.path.join(args.models_dir, m + ".onnx")
        # the file name carries the options, so changing them re-quantizes
        tag = re.sub(r"[^A-Za-z0-9.]+", "_", args.quantize_args).strip("_")
        dst = os.path.join(qdir, m + (".int8.%s.onnx" % tag if tag
                                      else ".int8.onnx"))
        if not (os.path.exists(dst) and
                os.path.getmtime(dst) >= os.path.getmtime(src) and
                os.path.getmtime(dst) >= os.path.getmtime(args.metainfer)):
            cmd = ([args.metainfer, "quantize", src, "--calib-random", "16"] +
                   shlex.split(args.quantize_args) + ["-o", dst])
            # --min-cosine runs the model a few hundred times
            rc, out, _, secs = run_measured(cmd, max(args.timeout, 1800))
            log.write("$ %s\n%s\n" % (" ".join(cmd), out.strip()))
            if rc != 0 or not os.path.exists(dst):
                last = out.strip().splitlines()[-1:] or ["?"]
                notes.append("%s: quantize failed: %s" % (m, last[0][:160]))
                continue
        qmodels[m] = dst
    print("bench: int8, %d models quantized" % len(qmodels))
    qi = Engine("metainfer-int8", mi.argv)
    qo = Engine("ort-qdq", ort.argv)
    for t in threads:
        for m in models:
            if m not in qmodels:
                continue
            inp = os.path.join(args.models_dir, m + ".input.npy")
            n = iters_used.get((m, t), 20)
            # ORT fp32 runs again here, alternating with the int8 runs, so
            # the speed-up compares figures taken under the same load.
            of = Engine("ort-fp32", ort.argv,
                        os.path.join(args.models_dir, m + ".onnx"))
            res = measure([qi, of, qo], qmodels[m], inp, t, args.rounds, n,
                          args.timeout, log)
            int8[(m, t)] = res
            print("  %-20s threads=%d  metainfer-int8 %s  ort-fp32 %s  "
                  "ort-qdq %s" % (m, t, fmt_ms(res["metainfer-int8"]),
                                  fmt_ms(res["ort-fp32"]),
                                  fmt_ms(res["ort-qdq"])), flush=True)
    if args.cosine_n > 0:
        for m in models:
            if m not in qmodels:
                continue
            cmd = [sys.executable, os.path.join(HERE, "cosine.py"),
                   "--model", m, "--int8", qmodels[m], "--metainfer",
                   args.metainfer, "-n", str(args.cosine_n), "--dist",
                   args.cosine_dist, "--work",
                   os.path.join(args.work, "cosine")]
            rc, out, _, secs = run_measured(cmd, 3600)
            log.write("$ %s\n%s\n" % (" ".join(cmd), out.strip()))
            mm = re.search(r"cosine min=(\S+) mean=(\S+) centered_min=(\S+) "
                           r"centered_mean=(\S+) floor=(\S+)", out)
            if rc != 0 or not mm:
                last = out.strip().splitlines()[-1:] or ["?"]
                cosine[m] = "error: " + last[0][:160]
            else:
                cosine[m] = tuple(float(x) for x in mm.groups())
            print("  cosine %-20s %s (%.0fs)" % (m, cosine[m], secs),
                  flush=True)
    # int8 accuracy on a small CNN trained here (scikit-learn digits).
    cmd = [sys.executable, os.path.join(ROOT, "tools", "models", "digits.py"),
           "--out", os.path.join(args.models_dir, "digits"), "--eval",
           "--metainfer", args.metainfer, "--ort"]
    rc, out, _, secs = run_measured(cmd, 1800)
    log.write("$ %s\n%s\n" % (" ".join(cmd), out.strip()))
    lines = [l for l in out.splitlines() if l.startswith("digits:")]
    if rc == 0 and lines:
        args.digits = lines
    else:
        last = out.strip().splitlines()[-1:] or ["?"]
        notes.append("digits int8 accuracy: failed (%s)." % last[0][:160])
    print("  " + "\n  ".join(lines or ["digits: failed"]), flush=True)
    return " ".join(notes)


def render(args, models, threads, engines, fp32, int8, cosine, int8_note,
           iters_used, base_rss, floor, started, ended, load0, load1, secs):
    L = []
    cmd = args.command or "tools/bench/bench.py"
    knobs = " ".join("%s=%s" % (k, shlex.quote(v))
                     for k, v in sorted(os.environ.items())
                     if k.startswith("BENCH_") and v != "")
    if knobs:
        cmd = knobs + " " + cmd
    L.append("# MetaInfer benchmarks")
    L.append("")
    L.append("Generated by `%s` (tools/bench/bench.py); every figure below "
             "comes from that run. Do not edit by hand: re-run the command."
             % cmd)
    L.append("")
    L.append("- Run: %s to %s UTC (%.0f s), git %s" % (
        started.strftime("%Y-%m-%d %H:%M"), ended.strftime("%H:%M"), secs,
        git_rev()))
    L.append("- Machine: %s, %d online CPUs, Linux %s; load average %.2f at "
             "start, %.2f at end" % (cpu_name(), os.cpu_count() or 0,
                                     platform.release(), load0[0], load1[0]))
    L.append("- **The machine was shared with other running jobs**: "
             "absolute figures are noisy; the two engines ran alternately "
             "(order flipped every round) so they saw the same conditions.")
    L.append("- Peer: ONNX Runtime %s (onnxruntime-node, CPU execution "
             "provider; graphOptimizationLevel all, intraOpNumThreads = "
             "threads, interOpNumThreads 1, sequential), driven by "
             "tools/bench/ort-run.js." % ort_version())
    L.append("- Models: tools/models/export.py, seeded random weights "
             "(BatchNorm scale/shift randomized, running statistics from seeded "
             "data, BatchNormalization kept in the graph), opset 13, batch 1, "
             "224x224 images, inputs uniform in [-1, 1); the Transformer "
             "is nn.TransformerEncoder (d_model 128, 4 heads, 2 layers, "
             "GELU, input 1x64x128).")
    L.append("- Method: per model and thread count, %d rounds alternating "
             "metainfer and ORT; each run does a warm-up then N timed "
             "iterations on the same input (N in the table) and reports its "
             "median; the table shows the median of the per-run medians. "
             "Ratio = metainfer / ORT (below 1 = metainfer faster). Peak RSS "
             "= largest ru_maxrss of the process over its runs." % args.rounds)
    L.append("- Host phases: on a shared host one engine's per-run medians "
             "can jump between two levels (~1.4x apart) that last longer "
             "than a run, so a median over few runs partly measures which "
             "engine met more slow phases. The \"best runs\" columns "
             "compare each engine's fastest run (lowest per-run median) as "
             "a second view, and the \"paired\" columns take, per round, "
             "the ratio of the two engines' runs (adjacent in time, so "
             "mostly in the same phase) and show the median of those "
             "ratios; the targets are judged on the medians.")
    if base_rss:
        L.append("- ORT's RSS includes the Node.js host: node with "
                 "onnxruntime-node loaded and no model peaks at %s MiB. The "
                 "column \"RSS ratio (net)\" divides by ORT's RSS minus that "
                 "baseline (the stricter comparison)." % fmt_mb(base_rss))
    if floor:
        L.append("- Per-call floor (one Relu on 16 floats, median of 2000 "
                 "calls, 1 thread): " + ", ".join(
                     "%s %.1f us" % (k, v * 1000)
                     for k, v in sorted(floor.items()))
                 + " (ORT's includes the JavaScript binding's per-call "
                 "cost: an upper bound on what the harness adds to each ORT "
                 "figure).")
    L.append("")
    names = [e.name for e in engines]
    for t in threads:
        L.append("## fp32, %d thread%s" % (t, "" if t == 1 else "s"))
        L.append("")
        if "metainfer" in names:
            L.append("| model | N | metainfer ms | ORT ms | ratio | "
                     "ratio (paired) | ratio (best runs) | "
                     "metainfer RSS MiB | ORT RSS MiB | RSS ratio | "
                     "RSS ratio (net) |")
            L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:"
                     "|---:|")
        else:
            L.append("| model | N | ORT ms | ORT RSS MiB |")
            L.append("|---|---:|---:|---:|")
        ratios = []
        bests = []
        pairs = []
        worst = None
        for m in models:
            res = fp32.get((m, t))
            if not res:
                continue
            o = res["ort"]
            if "metainfer" not in names:
                L.append("| %s | %d | %s | %s |" % (
                    PRETTY.get(m, m), iters_used[(m, t)], fmt_ms(o),
                    fmt_mb(o.get("rss", 0))))
                continue
            a = res["metainfer"]
            if "error" in a or "error" in o:
                err = a.get("error") or o.get("error")
                L.append("| %s | %d | %s | %s | — | | | | | | | " % (
                    PRETTY.get(m, m), iters_used[(m, t)], fmt_ms(a),
                    fmt_ms(o)))
                L[-1] = L[-1].rstrip() + " <!-- %s -->" % err[:120]
                continue
            ratio = a["median"] / o["median"]
            ratios.append(ratio)
            bests.append(a["best"] / o["best"])
            pr = paired(a, o)
            if pr is not None:
                pairs.append(pr)
            if worst is None or ratio > worst[1]:
                worst = (m, ratio)
            net = o["rss"] - base_rss if base_rss else 0
            L.append("| %s | %d | %.2f | %.2f | %.2f | %s | %.2f | %s | %s "
                     "| %.2f | %s |"
                     % (PRETTY.get(m, m), iters_used[(m, t)], a["median"],
                        o["median"], ratio,
                        "%.2f" % pr if pr is not None else "—", bests[-1],
                        fmt_mb(a["rss"]),
                        fmt_mb(o["rss"]), a["rss"] / o["rss"],
                        "%.2f" % (a["rss"] / net) if net > 0 else "—"))
        if "metainfer" in names:
            L.append("")
            L.append("Geometric mean ratio (metainfer/ORT), %d thread%s: "
                     "**%.2f** over %d models%s (paired: geomean %.2f, worst "
                     "%.2f; best runs: geomean %.2f, worst %.2f)." % (
                         t, "" if t == 1 else "s", geomean(ratios),
                         len(ratios),
                         "; worst %s at %.2f" % (PRETTY.get(worst[0]),
                                                  worst[1]) if worst else "",
                         geomean(pairs) if pairs else 0,
                         max(pairs) if pairs else 0,
                         geomean(bests) if bests else 0,
                         max(bests) if bests else 0))
            fails = [m for m in models if (m, t) in fp32 and
                     any("error" in fp32[(m, t)][n] for n in names)]
            if fails:
                L.append("")
                L.append("Failed runs (excluded from the mean): " + "; ".join(
                    "%s: %s" % (m, fp32[(m, t)]["metainfer"].get(
                        "error", fp32[(m, t)]["ort"].get("error", "")))
                    for m in fails))
        L.append("")

    if "metainfer" in names:
        L.append("## int8")
        L.append("")
        if not int8:
            L.append(int8_note or "No int8 results.")
            L.append("")
        else:
            L.append("int8 models from `metainfer quantize MODEL.onnx "
                     "--calib-random 16 %s-o MODEL.int8.onnx`. metainfer int8, "
                     "ORT fp32 (the original model) and ORT on the int8 QDQ "
                     "model run alternately, as above. Speed-up = ORT "
                     "fp32 ms / metainfer int8 ms (target >= 1.8 on the "
                     "CNNs). Cosine = cosine similarity of metainfer int8 "
                     "outputs with PyTorch fp32 outputs over %d seeded inputs "
                     "(%s; tools/bench/cosine.py; target >= 0.99). Random-weight "
                     "networks give similar outputs for different random "
                     "inputs, which inflates the plain cosine: \"floor\" is "
                     "the plain cosine between fp32 outputs of different "
                     "inputs (what a constant output would score), and the "
                     "centered cosine subtracts the mean fp32 output from "
                     "both sides so only the input-dependent part counts."
                     % (args.quantize_args + " " if args.quantize_args else "",
                        args.cosine_n, "uniform in [-1, 1), the "
                        "distribution --calib-random calibrates with"
                        if args.cosine_dist == "uniform" else
                        "standard normal"))
            L.append("")
            for t in threads:
                L.append("### int8, %d thread%s" % (t, "" if t == 1 else "s"))
                L.append("")
                L.append("| model | metainfer int8 ms | ORT fp32 ms | "
                         "speed-up vs ORT fp32 | speed-up (paired) | "
                         "speed-up (best runs) | "
                         "ORT int8 (same QDQ) ms | "
                         "metainfer int8 RSS MiB | cosine min / mean | "
                         "centered cosine min / mean | floor |")
                L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:"
                         "|---:|")
                for m in models:
                    r = int8.get((m, t))
                    if not r:
                        continue
                    a = r["metainfer-int8"]
                    q = r["ort-qdq"]
                    o = r["ort-fp32"]
                    ok = "error" not in a and "error" not in o
                    sp = "%.2f" % (o["median"] / a["median"]) if ok else "—"
                    sb = "%.2f" % (o["best"] / a["best"]) if ok else "—"
                    pr = paired(o, a) if ok else None
                    sp2 = "%.2f" % pr if pr is not None else "—"
                    c = cosine.get(m)
                    cs = ("%.4f / %.4f | %.4f / %.4f | %.3f" % c
                          if isinstance(c, tuple) else
                          "%s | | " % (c or "—"))
                    L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                             % (PRETTY.get(m, m), fmt_ms(a), fmt_ms(o), sp,
                                sp2, sb, fmt_ms(q),
                                fmt_mb(a.get("rss", 0)) if "error" not in a
                                else "—", cs))
                L.append("")
            digits = getattr(args, "digits", None)
            if digits:
                L.append("int8 accuracy on a small CNN trained by "
                         "tools/models/digits.py (scikit-learn digits, "
                         "seeded; int8 from `metainfer quantize --calib "
                         "build/models/digits/calib`; target: within 1 point "
                         "of fp32):")
                L.append("")
                L.append("```")
                L.extend(digits)
                L.append("```")
                L.append("")
            if int8_note:
                L.append(int8_note)
                L.append("")
    if "metainfer" in names:
        L.extend(targets(models, threads, fp32, int8, cosine,
                         getattr(args, "digits", None)))
    L.append("Raw output of every run: build/bench/bench.log.")
    L.append("")
    return "\n".join(L)


def targets(models, threads, fp32, int8, cosine, digits):
    """The issue's targets, each judged on this run's medians: met or not,
    with the models that miss it.  Nothing here is typed in by hand."""
    L = ["## Targets, judged on the medians above", ""]

    def verdict(bad):
        return "**not met**" if bad else "met"

    def pt(t):
        return "%d thread%s" % (t, "" if t == 1 else "s")

    def fx(x, limit):
        # three decimals where two would round onto the limit
        return ("%.3f" if abs(x - limit) < 0.005 else "%.2f") % x

    for t in threads:
        rs = {m: fp32[(m, t)]["metainfer"]["median"] /
              fp32[(m, t)]["ort"]["median"]
              for m in models if (m, t) in fp32 and
              all("error" not in v for v in fp32[(m, t)].values())}
        if not rs:
            continue
        g = geomean(list(rs.values()))
        over = sorted((m for m in rs if rs[m] > 1.2), key=lambda m: -rs[m])
        worst = max(rs, key=rs.get)
        L.append("- fp32, %s: geometric mean ratio <= 1.0: %s, %s; every "
                 "model <= 1.2: worst %s %s, %s%s." % (
                     pt(t), fx(g, 1.0), verdict(g > 1.0),
                     PRETTY.get(worst, worst), fx(rs[worst], 1.2),
                     verdict(over),
                     " (over: " + ", ".join("%s %s" % (PRETTY.get(m, m),
                                                       fx(rs[m], 1.2))
                                            for m in over) + ")"
                     if over else ""))
    for t in threads:
        sp = {}
        for m in models:
            r = int8.get((m, t))
            if m not in CNNS or not r or "error" in r["metainfer-int8"] or \
                    "error" in r["ort-fp32"]:
                continue
            sp[m] = r["ort-fp32"]["median"] / r["metainfer-int8"]["median"]
        if not sp:
            continue
        low = [m for m in models if m in sp and sp[m] < 1.8]
        met = [m for m in models if m in sp and sp[m] >= 1.8]
        L.append("- int8, %s: >= 1.8x ORT fp32 on the CNNs: %s; met on %d "
                 "of %d%s%s." % (
                     pt(t), verdict(low), len(met), len(sp),
                     " (" + ", ".join("%s %s" % (PRETTY.get(m, m),
                                                 fx(sp[m], 1.8))
                                      for m in met) + ")" if met else "",
                     "; below: " + ", ".join(
                         "%s %s" % (PRETTY.get(m, m), fx(sp[m], 1.8))
                         for m in low)
                     if low else ""))
    cos = {m: c[0] for m, c in cosine.items() if isinstance(c, tuple)}
    if cos:
        bad = [m for m in models if m in cos and cos[m] < 0.99]
        lo = min(cos, key=cos.get)
        L.append("- int8 cosine vs PyTorch fp32 >= 0.99 on every input: "
                 "lowest %s %.4f, %s%s." % (
                     PRETTY.get(lo, lo), cos[lo], verdict(bad),
                     " (below: " + ", ".join(PRETTY.get(m, m) for m in bad)
                     + ")" if bad else ""))
    rss = []
    for (m, t), res in fp32.items():
        a, o = res.get("metainfer", {}), res.get("ort", {})
        if a.get("rss") and o.get("rss"):
            rss.append((a["rss"] / o["rss"], m, t, "fp32"))
    for (m, t), r in int8.items():
        a, o = r.get("metainfer-int8", {}), r.get("ort-fp32", {})
        if a.get("rss") and o.get("rss"):
            rss.append((a["rss"] / o["rss"], m, t, "int8"))
    if rss:
        w = max(rss)
        L.append("- Peak RSS <= 1.2x ORT's: worst %s (%s %s, %s), %s." % (
            fx(w[0], 1.2), PRETTY.get(w[1], w[1]), w[3], pt(w[2]),
            verdict(w[0] > 1.2)))
    if digits:
        ok = any("PASS" in d for d in digits if d.startswith("digits: metainfer"))
        L.append("- digits int8 accuracy within 1 point of fp32: %s." %
                 verdict(not ok))
    L.append("- Steady-state inference does no heap allocation: not a "
             "benchmark figure; `make check` tests it (lib/tests/test-api.c, "
             "a malloc counter over steady-state runs).")
    L.append("")
    L.append("Why a target is missed where it is: Documentation/"
             "quantization.rst, \"Where the int8 speed-up stops on AVX2\".")
    L.append("")
    return L


def ort_version():
    try:
        import json
        with open(os.path.join(ROOT, "build", "ort", "node_modules",
                               "onnxruntime-node", "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
