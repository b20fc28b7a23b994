#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `metainfer health` on a planted /proc and /sys (make check-health):
# line and JSON output, absent sensors as '-' / null, option errors.
#
#   tools/metainfer/test-health-cli.sh build/metainfer

set -u
MI=${1:?usage: test-health-cli.sh METAINFER}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/test-health-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
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

mkdir -p $T/proc/pressure $T/sys/class/thermal/thermal_zone0
printf 'cpu  100 0 100 700 100 0 0 0 0 0\nprocs_running 3\n' >$T/proc/stat
printf 'MemTotal: 1000 kB\nMemAvailable: 250 kB\n' >$T/proc/meminfo
echo 50000 >$T/sys/class/thermal/thermal_zone0/temp
echo passive >$T/sys/class/thermal/thermal_zone0/trip_point_0_type
echo 75000 >$T/sys/class/thermal/thermal_zone0/trip_point_0_temp

out=$($MI health --proc $T/proc --sys $T/sys --devices cpu --interval 20 --count 3)
ok $? "health --count 3 exits 0"
[ "$(echo "$out" | wc -l)" = 3 ]
ok $? "three lines for one device and three samples"
echo "$out" | head -1 | grep -q '^cpu .* memory=0.250 bandwidth=- thermal=0.500 power=- queue=1.000'
ok $? "text: memory 0.25, thermal 0.5, bandwidth and power absent ('-'), queue 1"

$MI health --proc $T/proc --sys $T/sys -d cpu -i 20 -n 2 --json >$T/out.json
ok $? "health --json exits 0"
$PY - $T/out.json <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 2, lines
v = lines[0]
assert v["device"] == "cpu" and v["index"] == 0, v
assert v["bandwidth"] is None and v["power"] is None, v
assert abs(v["memory"] - 0.25) < 1e-9 and abs(v["thermal"] - 0.5) < 1e-9, v
assert v["raw"]["queue_depth"] == 3 and "psi_mem" not in v["raw"], v
assert v["interval_ns"] > 0 and lines[1]["seq"] == v["seq"] + 1, lines
PYEOF
ok $? "JSON: nulls for absent sensors, raw values, consecutive rounds"

$MI health --interval 0 >/dev/null 2>$T/err
[ $? = 2 ] && grep -q 'interval' $T/err
ok $? "--interval 0: usage error ($(cat $T/err))"
$MI health --count x >/dev/null 2>$T/err
[ $? = 2 ]
ok $? "--count x: usage error"
$MI health --devices nosuch -n 1 >/dev/null 2>$T/err
[ $? = 1 ] && grep -q "no device 'nosuch'" $T/err
ok $? "unknown device: one line, exit 1 ($(cat $T/err))"
$MI health --bogus >/dev/null 2>&1
[ $? = 2 ]
ok $? "unknown option: exit 2"
$MI health -n 1 -i 50 >$T/live.txt
ok $? "on this machine's own /proc and /sys: $(head -1 $T/live.txt)"

echo "1..$n"
[ $fail = 0 ]
