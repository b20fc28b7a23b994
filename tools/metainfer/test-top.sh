#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `perf stat` on the metainfer PMUs and `metainfer top`, inside the test VM
# with metainfer.ko and metainfer_sim.ko loaded (make check-top):
#
#   tools/vm/vmrun -- tools/metainfer/test-top.sh build
#
# The load is `perf_test --load MINOR JOBS FILE` (selftests/perf_test.c),
# which writes what GET_COUNTERS says its jobs did; perf's interval counts
# must add up to exactly that, a gauge's intervals must show the sensor,
# and `metainfer top --once --json` must report every device, the load's
# rates and the load's process.  TAP output; exit 0 only if all passed.

set -u
B=${1:?usage: test-top.sh BUILD_DIR}
B=$(cd "$B" && pwd) || exit 1
TOP=$B/metainfer
LOAD=$B/selftests/perf_test
PY=/usr/bin/python3
SIM=/sys/bus/metainfer_sim
T=$(mktemp -d /tmp/test-top.XXXXXX)
n=0
fail=0

ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=$((fail + 1))
	fi
}

minor_of() {
	local r=(/sys/bus/platform/devices/metainfer_sim.$1/drm/renderD*)
	[ -e "${r[0]}" ] && echo "${r[0]##*renderD}"
}

for spec in "40 ethos-u55-high" "41 dsp-nchw"; do
	echo "$spec" >$SIM/new_device || { echo "Bail out! cannot create sim device '$spec'"; exit 1; }
done
for i in $(seq 100); do
	M=$(minor_of 40) && M2=$(minor_of 41) && [ -c /dev/dri/renderD$M ] && [ -c /dev/dri/renderD$M2 ] && break
	sleep 0.05
done
[ -n "${M:-}" ] && [ -n "${M2:-}" ] || { echo "Bail out! no render nodes"; exit 1; }
PMU=metainfer_$M

# ---- perf stat: interval counts add up to GET_COUNTERS' -----------------
if command -v perf >/dev/null; then
	perf stat -a -x, -I 500 -o $T/stat.csv \
		-e $PMU/busy-ns/,$PMU/jobs/,$PMU/macs/ -- \
		$LOAD --load $M 400 $T/load.txt 1.2 >$T/perf.out 2>&1
	ok $? "perf stat -a -I 500 -e $PMU/busy-ns/,$PMU/jobs/,$PMU/macs/ runs the load"
	$PY - $T/stat.csv $T/load.txt $PMU <<'PYEOF'
import sys
stat, load, pmu = sys.argv[1:]
want = dict(l.split() for l in open(load))
got, rows = {}, {}
for line in open(stat):
    f = line.strip().split(',')
    if len(f) < 4 or line.startswith('#'):
        continue
    ev = f[3]
    for k in ('busy-ns', 'jobs', 'macs'):
        if ev == '%s/%s/' % (pmu, k):
            if f[1] in ('<not counted>', '<not supported>'):
                sys.exit('%s: %s' % (ev, f[1]))
            got[k] = got.get(k, 0) + int(float(f[1]))
            rows[k] = rows.get(k, 0) + 1
print('# intervals: %s; sums: %s; GET_COUNTERS: %s' % (rows, got, want))
# batches of 400 for at least 1.2 s: a fast host still spans intervals
ok = (got.get('jobs') == int(want['jobs']) and int(want['jobs']) % 400 == 0 and int(want['jobs']) > 0 and
      got.get('busy-ns') == int(want['busy_ns']) > 0 and
      got.get('macs') == int(want['macs']) > 0 and min(rows.values()) >= 2)
sys.exit(0 if ok else 1)
PYEOF
	ok $? "perf's intervals sum to the load's GET_COUNTERS difference (jobs, busy-ns, macs)"

	perf stat -a -x, -I 500 -o $T/gauge.csv -e $PMU/clock-kHz/,$PMU/temperature-mC/ -- sleep 2.2 >/dev/null 2>&1
	ok $? "perf stat -e $PMU/clock-kHz/,$PMU/temperature-mC/ runs"
	clock=$($PY -c "
import sys
for l in open('/sys/bus/platform/devices/metainfer_sim.40/personality'):
    k, _, v = l.strip().partition('=')
    if k == 'clock_hz': print(int(v) // 1000)")
	$PY - $T/gauge.csv $PMU $clock <<'PYEOF'
import sys
path, pmu, clock = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = {'clock-kHz': [], 'temperature-mC': []}
for line in open(path):
    f = line.strip().split(',')
    if len(f) < 4 or line.startswith('#'):
        continue
    for k in rows:
        if f[3] == '%s/%s/' % (pmu, k):
            rows[k].append((float(f[0]), float(f[1])))
# a gauge counts value x seconds: divide by each interval's own length
# (perf's timestamps), leaving out the first and the short last one
def means(r):
    return [v / (t - r[i - 1][0]) for i, (t, v) in enumerate(r) if 0 < i < len(r) - 1]
clk, temp = means(rows['clock-kHz']), means(rows['temperature-mC'])
print('# per-interval means: clock-kHz %s (nominal %d), temperature-mC %s' %
      (['%.0f' % c for c in clk], clock, ['%.0f' % t for t in temp]))
ok = (len(clk) >= 1 and all(abs(c - clock) < 0.05 * clock for c in clk) and
      all(10000 < t < 150000 for t in temp))
sys.exit(0 if ok else 1)
PYEOF
	ok $? "gauge intervals show the sensor: clock-kHz = nominal clock, temperature plausible"

	# a perf session open while its device is removed
	echo "42 ethos-u55-high" >$SIM/new_device
	for i in $(seq 100); do
		M3=$(minor_of 42) && [ -c /dev/dri/renderD$M3 ] && break
		sleep 0.05
	done
	perf stat -a -x, -I 200 -o $T/unplug.csv \
		-e metainfer_$M3/jobs/,metainfer_$M3/temperature-mC/ -- sleep 4 >/dev/null 2>&1 &
	ppid=$!
	for i in $(seq 200); do
		grep -q "metainfer_$M3/jobs/" $T/unplug.csv 2>/dev/null && break
		sleep 0.05
	done
	$LOAD --load $M3 50 $T/load3.txt
	echo 42 >$SIM/del_device
	ok $? "del_device with perf stat -e metainfer_$M3/... running"
	[ -e /sys/bus/event_source/devices/metainfer_$M3 ]
	ok $? "the PMU stays while the session is open"
	wait $ppid
	ok $? "the perf session ends normally"
	for i in $(seq 100); do
		[ -e /sys/bus/event_source/devices/metainfer_$M3 ] || break
		sleep 0.05
	done
	[ ! -e /sys/bus/event_source/devices/metainfer_$M3 ]
	ok $? "the PMU is gone after the session"
	$PY - $T/unplug.csv metainfer_$M3 <<'PYEOF'
import sys
jobs = sum(int(float(f[1])) for f in (l.strip().split(',') for l in open(sys.argv[1]))
           if len(f) > 3 and f[3] == sys.argv[2] + '/jobs/')
print('# jobs counted across the removal: %d' % jobs)
sys.exit(0 if jobs == 50 else 1)
PYEOF
	ok $? "its counts up to the removal are all there (50 jobs)"
else
	echo "ok $((n += 1)) - # SKIP no perf(1) (Debian package linux-perf)"
fi

# ---- metainfer top ------------------------------------------------------
$LOAD --load $M 200 $T/load2.txt 5 &
lpid=$!
sleep 0.5
$TOP top --once --json -d 1 >$T/top.json 2>$T/top.err
ok $? "metainfer top --once --json"
$TOP top --once -d 0.2 >$T/top.txt 2>&1
ok $? "metainfer top --once (text)"
sed 's/^/# /' $T/top.txt
grep -q "^renderD$M .*ethos-u55-high" $T/top.txt && grep -q "perf_test *renderD$M " $T/top.txt
ok $? "the text report lists renderD$M and the load's process"
wait $lpid
ok $? "the load finished"
$PY - $T/top.json $M $M2 $lpid $T/load2.txt <<'PYEOF'
import json, os, sys
path, m, m2, lpid, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
lines = open(path).read().splitlines()
assert len(lines) == 1, 'one report, one line'
r = json.loads(lines[0])
minors = sorted(int(d[7:]) for d in os.listdir('/dev/dri') if d.startswith('renderD'))
devs = {d['minor']: d for d in r['devices']}
print('# devices %s, clients %s' % (sorted(devs), [(c['pid'], c['comm'], c['minor']) for c in r['clients']]))
assert m in devs and m2 in devs, 'both sim devices'
assert set(devs) <= set(minors)
d = devs[m]
print('# renderD%d: %s' % (m, json.dumps(d)))
assert d['name'] == 'ethos-u55-high' and d['backend'] == 'metainfer_sim'
assert 0.5 <= r['interval_s'] < 5
assert d['jobs_per_s'] > 0 and 0 < d['utilization_pct'] <= 100.0
assert d['jobs_completed'] > 0 and d['busy_ns'] > 0 and d['queue_depth'] >= 0
assert 0 < d['temperature_mc'] < 150000 and d['power_mw'] > 0
assert 0 < d['clock_khz'] <= d['clock_nominal_khz']
assert isinstance(d['throttle'], list) and d['removed'] is False
assert devs[m2]['jobs_per_s'] == 0, 'the idle device is idle'
cl = [c for c in r['clients'] if c['pid'] == lpid]
assert len(cl) == 1, 'the load is one client'
c = cl[0]
print('# load client: %s' % json.dumps(c))
assert c['comm'] == 'perf_test' and c['minor'] == m and c['client_id'] > 0
assert c['jobs_per_s'] > 0 and c['busy_pct'] > 0 and 'q0' in c['engine_ns']
assert c['memory_kib'] >= 32
PYEOF
ok $? "the JSON report: both devices, the load's rates and its process"

$TOP top --bogus >/dev/null 2>$T/err
[ $? = 2 ] && [ $(wc -l <$T/err) = 1 ]
ok $? "an unknown option: exit 2, one line"

echo 40 >$SIM/del_device
echo 41 >$SIM/del_device
if ls /dev/dri/renderD* >/dev/null 2>&1 && $TOP top --once -d 0.1 >/dev/null 2>&1; then
	echo "ok $((n += 1)) - # SKIP other metainfer devices exist"
else
	$TOP top --once -d 0.1 >/dev/null 2>$T/err
	rc=$?
	[ $rc = 1 ] && grep -q "no metainfer device" $T/err && [ $(wc -l <$T/err) = 1 ]
	ok $? "no device: exit 1, one clear line ($(cat $T/err))"
fi

rm -rf "$T"
echo "1..$n"
[ $fail = 0 ]
