#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""check-supernet: train a tiny supernet, then check MetaInfer against it.

  check_supernet.py --out DIR --test TEST-SUPERNET --metainfer BIN
                    --metactl METACTL-TRAIN

1. tools/supernet/supernet.py --configs-onnx --metactl (few epochs: a
   tiny run; the meta-controller trained and stored in the model);
2. plain.onnx (the metadata removed), badmeta.onnx (a selector name
   that does not exist) and badctl.onnx (a truncated controller) for the
   error cases;
3. ONNX Runtime (tools/bench/ort-run.js) on every config_<abc>.onnx ->
   ort_<abc>.npy;
4. lib/meta/tests/test-supernet DIR (pruned == full == ORT, switching
   under a loop of runs, errors, meta-controller);
5. the CLI: metainfer switch --list / --config / a bad --config;
6. the trained meta-controller against the oracle on held-out devices
   and states, within bounds (Documentation/supernet.rst).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def sh(cmd, expect=0):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace")
    if r.returncode != expect:
        print(out)
        raise SystemExit("FAIL: %s exited %d, expected %d"
                         % (" ".join(cmd), r.returncode, expect))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--metainfer", required=True)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--metactl", required=True,
                    help="the meta-controller trainer (metactl-train)")
    args = ap.parse_args()

    import numpy as np
    import onnx

    t0 = time.time()
    print(sh([sys.executable, os.path.join(HERE, "supernet.py"), "--out",
              args.out, "--epochs", str(args.epochs), "--warmup", "2",
              "--configs-onnx", "--metactl", args.metactl]).strip())
    t_train = time.time() - t0
    d = args.out
    meta_ok = onnx.load(os.path.join(d, "supernet.onnx"))
    plain = onnx.load(os.path.join(d, "supernet.onnx"))
    del plain.metadata_props[:]
    onnx.save(plain, os.path.join(d, "plain.onnx"))
    meta = json.loads(meta_ok.metadata_props[0].value)
    meta["layers"][1]["select"][2] = "metainfer.switch.L1.nosuch"
    meta_ok.metadata_props[0].value = json.dumps(meta)
    onnx.save(meta_ok, os.path.join(d, "badmeta.onnx"))
    badctl = onnx.load(os.path.join(d, "supernet.onnx"))
    for p in badctl.metadata_props:
        if p.key == "metainfer.metactl":
            p.value = p.value[:len(p.value) // 2]
    onnx.save(badctl, os.path.join(d, "badctl.onnx"))

    t1 = time.time()
    x = os.path.join(d, "test_x.npy")
    y = np.load(os.path.join(d, "test_y.npy"))
    ort = os.path.join(ROOT, "tools", "bench", "ort-run.js")
    worst = 0
    for c in meta["configs"]:
        name = "".join(map(str, c["choice"]))
        out = os.path.join(d, "ort_%s.npy" % name)
        sh(["node", ort, os.path.join(d, "config_%s.onnx" % name),
            "--input", x, "--output", out, "--threads", "1"])
        acc = float((np.load(out).argmax(1) == y).mean() * 100)
        worst = max(worst, abs(acc - c["accuracy"]))
    print("ok   ONNX Runtime ran %d configurations in %.1fs; accuracy "
          "within %.2f points of PyTorch's" % (len(meta["configs"]),
                                              time.time() - t1, worst))
    if worst > 0.5:
        raise SystemExit("FAIL: ONNX Runtime accuracy differs from the "
                         "metadata by %.2f points" % worst)
    print(sh([args.test, d]).strip())

    model = os.path.join(d, "supernet.onnx")
    out = sh([args.metainfer, "switch", model, "--list"])
    if out.count("\n") < 27 + 3 or "L1" not in out:
        raise SystemExit("FAIL: switch --list:\n" + out)
    out = sh([args.metainfer, "switch", model, "--config", "0,2,1",
              "--input", x, "--bench", "5"])
    if "config 0,2,1" not in out or "latency_ms" not in out:
        raise SystemExit("FAIL: switch --config:\n" + out)
    out = sh([args.metainfer, "switch", model, "--config", "0,3,1"], 1)
    if "variants 0..2, not 3" not in out:
        raise SystemExit("FAIL: bad --config message:\n" + out)
    out = sh([args.metainfer, "switch", model, "--choose", "--health",
              "compute=0.3,thermal=0.2", "--budget-us", "60"])
    if "chose" not in out:
        raise SystemExit("FAIL: switch --choose:\n" + out)
    print("ok   metainfer switch --list / --config / --choose / bad config")
    t2 = time.time()
    # regret and miss bounds: below the formula's best and above the
    # trained controller's worst over seeds 1-4; hot: above the formula's
    # mean (Documentation/supernet.rst)
    out = sh([args.metactl, model, "--stored", "--max-regret", "3",
              "--max-miss", "12", "--min-hot", "80", "--beat-formula"]).strip()
    print(out)
    print("ok   trained meta-controller within bounds (%.1fs)"
          % (time.time() - t2))
    print("PASS check-supernet (training %.1fs, total %.1fs)"
          % (t_train, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
