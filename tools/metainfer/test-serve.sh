#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# test-serve.sh METAINFER SUPERNET.onnx [SUPERNET.int8.onnx]: `metainfer
# serve` end to end on
# the host: two streams on the CPU and two emulated accelerators, a
# thermal event injected on the device stream 0 starts on (--heat), then
# gone.  Checks: once-a-second lines, the event confirmed and acted on
# (a switch chain), recovery switching back, no failed inference, JSON
# output that parses, and the option errors.  With the quantized model,
# whose layers run as device jobs: stream 0's jobs leave the heated
# device and come back.
set -u
BIN=$1
MODEL=$2
MODEL8=${3:-}
PY=${PYTHON:-/usr/bin/python3}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# which device does stream 0 start on?  (a 1-second run)
"$BIN" serve "$MODEL" --streams 2 --emulate 2 --duration 1 >"$tmp/probe" 2>&1 ||
	fail "probe run: $(tail -1 "$tmp/probe")"
dev=$(sed -n 's/^stream 0 .* on \([a-z0-9]*\) \[.*/\1/p' "$tmp/probe" | head -1)
[ -n "$dev" ] || { fail "no stream line: $(cat "$tmp/probe")"; dev=emu0; }

"$BIN" serve "$MODEL" --streams 2 --emulate 2 --duration 5 \
	--heat "$dev:1:3:0.1" >"$tmp/out" 2>&1 || fail "serve exited $?"
grep -q '^--- ' "$tmp/out" || fail "no once-a-second lines"
[ "$(grep -c '^--- ' "$tmp/out")" -ge 3 ] || fail "fewer than 3 seconds printed"
grep -q "^device $dev .*thermal=0.10!" "$tmp/out" ||
	fail "thermal degradation of $dev not shown as confirmed"
grep -q "^event .* $dev thermal degraded" "$tmp/out" ||
	fail "no switch chain for the degradation"
grep -q "^event .* $dev thermal recovered" "$tmp/out" ||
	fail "no switch chain for the recovery"
grep -q '^summary: .* 0 failed; ' "$tmp/out" || fail "summary: $(grep summary "$tmp/out")"

"$BIN" serve "$MODEL" --emulate 1 --duration 2 --json --heat "emu0:0.5:1.2" \
	>"$tmp/json" 2>&1 || fail "json run exited $?"
"$PY" - "$tmp/json" <<'PYEOF' || fail "JSON output"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
secs = [l for l in lines if "t" in l]
summ = [l["summary"] for l in lines if "summary" in l]
assert len(secs) >= 2, secs
assert secs[0]["devices"][0]["name"] == "cpu"
assert "structure" in secs[0]["streams"][0]
assert len(summ) == 1 and summ[0]["failures"] == 0, summ
PYEOF

# the switch timeline: serve --timeline under metainfer trace --user-only
# (no driver on the host), merged into the trace file
"$BIN" trace --user-only --timeline "$tmp/tl" -o "$tmp/trace.json" -- \
	"$BIN" serve "$MODEL" --streams 2 --emulate 2 --duration 4 \
	--heat "$dev:1:2:0.1" --timeline "$tmp/tl" >"$tmp/tout" 2>&1 ||
	fail "trace --user-only -- serve --timeline exited $?: $(tail -2 "$tmp/tout")"
"$PY" - "$tmp/trace.json" "$tmp/tout" <<'PYEOF' || fail "switch timeline in the trace"
import json, re, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
out = open(sys.argv[2]).read()
printed = re.findall(r"^event (\d+): (\S+) \S+ (\S+) -> stream (\d+) (\S+)->(\S+),",
                     out, re.M)
chains = [e for e in ev if e.get("ph") == "X" and "from_device" in e.get("args", {})]
steps = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "switch"
         and "from_device" not in e.get("args", {})]
names = [e for e in ev if e.get("ph") == "M" and e["name"] == "process_name"]
assert printed, "serve printed no chain"
assert len(chains) == len(printed), (len(chains), len(printed))
assert any("live switching" in n["args"]["name"] for n in names), names
assert len(steps) == 5 * len(chains), (len(steps), len(chains))
for c in chains:
    a = c["args"]
    assert (str(a["event"]), a["device"], a["type"], str(c["tid"]), a["from_device"],
            a["to_device"]) in printed, a
    mine = [s for s in steps if s["args"]["event"] == a["event"] and s["tid"] == c["tid"]]
    assert len(mine) == 5, mine
    t = c["ts"]
    for s in sorted(mine, key=lambda s: s["ts"]):
        # nested in the chain's slice, one after the other (ts, dur
        # are rounded to 1 ns each)
        assert s["ts"] >= t - 0.01 and s["ts"] + s["dur"] <= c["ts"] + c["dur"] + 0.01, (s, c)
        t = s["ts"] + s["dur"]
    moves = [e for e in ev if e.get("ph") == "i" and e.get("args", {}).get("event") == a["event"]
             and e["tid"] == c["tid"]]
    assert len(moves) == (a["from_device"] != a["to_device"]), (moves, a)
ts = [e["ts"] for e in ev if e.get("ph") != "M"]
assert ts == sorted(ts), "events not in time order"
print("timeline: %d chains in the trace" % len(chains))
PYEOF
printf '{"timeline": "chain", "pid": 1}\n' >"$tmp/badtl"
"$BIN" trace --user-only --timeline "$tmp/badtl" -o "$tmp/bad.json" -d 0.1 \
	>/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "badtl:1: not a chain line" "$tmp/err" || fail "bad timeline line: rc $rc"
"$BIN" trace --user-only -d 0.1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "--user-only without --timeline: rc $rc"

"$BIN" serve >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "no model" "$tmp/err" || fail "no model: rc $rc"
"$BIN" serve "$MODEL" --heat nosuch:1:2 --duration 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "no device 'nosuch'" "$tmp/err" || fail "bad --heat device: rc $rc"
"$BIN" serve "$MODEL" --heat cpu:2:1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "bad --heat times: rc $rc"
"$BIN" serve "$MODEL" --streams 0 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "--streams 0: rc $rc"
"$BIN" serve /nonexistent.onnx --duration 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "missing model: rc $rc"

if [ -n "$MODEL8" ]; then
	"$BIN" serve "$MODEL8" --streams 2 --emulate 2 --duration 1 >"$tmp/probe8" 2>&1 ||
		fail "int8 probe run: $(tail -1 "$tmp/probe8")"
	d8=$(sed -n 's/^stream 0 .* on \([a-z0-9]*\) \[.*/\1/p' "$tmp/probe8" | head -1)
	# 8 s: on a loaded host a stream may stall for a second or two
	"$BIN" serve "$MODEL8" --streams 2 --emulate 2 --duration 8 \
		--heat "${d8:-emu0}:1:3:0.1" >"$tmp/out8" 2>&1 || fail "int8 serve exited $?"
	# per second: stream 0's main device and the devices its jobs ran on
	awk -v d="$d8" '
		/^stream 0 / { for (i = 1; i < NF; i++) {
				if ($i == "on") dev = $(i + 1)
				if ($i == "jobs") jobs = $(i + 1) }
			if (dev == d && jobs ~ "(^|,)" d ":") home++
			if (dev != d && jobs !~ "(^|,)" d ":" && jobs ~ "^emu") away++ }
		END { exit !(home >= 2 && away >= 1) }' "$tmp/out8" ||
		fail "stream 0's jobs did not leave $d8 and come back: $(grep '^stream 0' "$tmp/out8" | sed 's/  */ /g')"
	grep -q '^summary: .* 0 failed; ' "$tmp/out8" || fail "int8 summary: $(grep summary "$tmp/out8")"
fi

[ $fails = 0 ] && echo "test-serve: ok" || echo "test-serve: FAILED ($fails)"
exit $((fails != 0))
