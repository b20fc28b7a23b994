#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Per-inference CPU time (user+sys) of metainfer and ONNX Runtime at one
# thread: (cpu(N+1 runs) - cpu(1 run)) / N, so model loading cancels out.
# On a shared, overloaded machine CPU time is steadier than wall-clock
# latency (it ignores time spent descheduled; it still includes cache and
# SMT contention).  /usr/bin/time has 10 ms resolution: use N >= 20.
#
#   N=40 lib/cpu/tests/cputime-vs-ort.sh resnet18 mobilenet_v2 ...
#
# Models come from build/models (tools/models/export.py); ORT from
# build/ort (make ort).  Not a test: prints figures only.
set -u
cd "$(dirname "$0")/../../.."
N=${N:-30}
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1+$2}'; }
for m in "$@"; do
	f=build/models/$m.onnx
	if [ ! -f "$f" ]; then
		echo "$m: $f missing (tools/models/export.py --only $m)" >&2
		continue
	fi
	a0=$(cpu build/metainfer run "$f" -q -t 1 --bench 1 --warmup 0)
	a1=$(cpu build/metainfer run "$f" -q -t 1 --bench $((N + 1)) --warmup 0)
	b0=$(cpu node tools/bench/ort-run.js "$f" --threads 1 --bench 1)
	b1=$(cpu node tools/bench/ort-run.js "$f" --threads 1 --bench $((N + 1)))
	echo "$m $a0 $a1 $b0 $b1" | awk -v n="$N" '{
		mi = ($3 - $2) / n * 1000; ort = ($5 - $4) / n * 1000;
		printf "%-20s metainfer %6.1f ms  ORT %6.1f ms  ratio %5.2f  (CPU ms per inference, 1 thread)\n",
		       $1, mi, ort, (ort > 0 ? mi / ort : 0) }'
done
