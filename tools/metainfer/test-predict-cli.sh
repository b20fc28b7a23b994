#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `metainfer predict`: the default plan and a written plan give a table
# and JSON with a positive latency and peak memory, a fitted predictor
# changes the estimate; every bad argument (no model, unknown device, bad
# plan or predictor file, bad option) gets one line on stderr and exit
# status 1 (bad input) or 2 (usage).
set -u
MI=${1:-build/metainfer}
MODEL=${2:?usage: test-predict-cli.sh METAINFER MODEL.onnx PREDICTOR}
PRED=${3:?usage: test-predict-cli.sh METAINFER MODEL.onnx PREDICTOR}
PY=${PYTHON:-/usr/bin/python3}
W=$(mktemp -d /tmp/mi-predict-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect_err DESC STATUS PATTERN CMD...: that exit status, one stderr
# line matching PATTERN.
expect_err() {
	local desc=$1 want=$2 pat=$3; shift 3
	"$@" >"$W/out" 2>"$W/err"
	local rc=$? lines
	lines=$(wc -l <"$W/err")
	if [ "$rc" != "$want" ]; then
		fail "$desc (exit $rc, expected $want): $(head -c 300 "$W/err")"
	elif [ "$want" = 1 ] && [ "$lines" != 1 ]; then
		fail "$desc: expected one error line, got $lines: $(head -c 300 "$W/err")"
	elif ! grep -q -- "$pat" "$W/err"; then
		fail "$desc: '$(head -n 1 "$W/err")' does not say '$pat'"
	else
		pass "$desc: $(head -n 1 "$W/err")"
	fi
}

expect_ok() {
	local desc=$1; shift
	if "$@" >"$W/out" 2>"$W/err"; then
		pass "$desc"
	else
		fail "$desc (exit $?): $(head -c 300 "$W/err")"
	fi
}

expect_ok "help" "$MI" predict --help
grep -q "usage: .* predict MODEL.onnx" "$W/out" || fail "help text"
expect_ok "default plan, roofline" "$MI" predict "$MODEL" -t 1
grep -q "^latency [0-9.]* ms" "$W/out" || fail "no latency line: $(cat "$W/out")"
grep -q "roofline only" "$W/out" || fail "does not say roofline only"
expect_ok "json, roofline" "$MI" predict "$MODEL" -t 1 --json
cp "$W/out" "$W/roof.json"
expect_ok "json, fitted predictor" "$MI" predict "$MODEL" -t 1 --isa avx2 \
	--predictor "$PRED" --json
cp "$W/out" "$W/fit.json"
if "$PY" - "$W/roof.json" "$W/fit.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); f = json.load(open(sys.argv[2]))
for j in (r, f):
    assert j["latency_ms"] > 0, j
    d = j["devices"][0]
    assert d["name"] == "cpu" and d["peak_bytes"] > 0 and d["weight_bytes"] > 0, d
    assert abs(d["busy_ms"] - j["latency_ms"]) < 1e-3, j  # CPU only: serial
assert r["latency_ms"] != f["latency_ms"], (r, f)
PYEOF
then pass "json fields, the predictor changes the estimate"
else fail "json fields"; fi
expect_ok "write a plan" "$MI" plan "$MODEL" -t 1 -o "$W/plan.json"
expect_ok "--plan" "$MI" predict "$MODEL" -t 1 --plan "$W/plan.json"

# --db: a CPU fingerprint (tiny grid) calibrates the CPU; the estimate
# moves; a library rebuild or another device's DB is not this run's.
expect_ok "fingerprint for --db" "$MI" fingerprint --quick --db "$W/fp.db"
expect_ok "--db" "$MI" predict "$MODEL" -t 1 --db "$W/fp.db" --json
grep -q "cpu calibrated from [0-9]* fingerprint rows" "$W/err" ||
	fail "--db did not calibrate the CPU: $(cat "$W/err")"
cp "$W/out" "$W/db.json"
if "$PY" - "$W/roof.json" "$W/db.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))
assert d["latency_ms"] > 0 and d["latency_ms"] != r["latency_ms"], (r, d)
assert "fingerprint" in d.get("predictor", ""), d
PYEOF
then pass "--db changes the estimate and says so"
else fail "--db json"; fi
expect_ok "--db, empty DB" "$MI" predict "$MODEL" -t 1 --db "$W/empty.db"
grep -q "cpu has no fingerprint in the DB; roofline" "$W/err" ||
	fail "empty DB not reported: $(cat "$W/err")"
echo "not sqlite" >"$W/bad.db"
expect_err "--db not a database" 1 "bad.db" "$MI" predict "$MODEL" --db "$W/bad.db"

expect_err "no model" 2 "expected one MODEL.onnx" "$MI" predict
expect_err "bad option" 2 "usage" "$MI" predict "$MODEL" --bogus
expect_err "bad threads" 2 "bad thread count" "$MI" predict "$MODEL" -t x
expect_err "missing model" 1 "no-such.onnx" "$MI" predict "$W/no-such.onnx"
expect_err "unknown device" 1 "nodev9" "$MI" predict "$MODEL" --devices nodev9
echo "not a predictor" >"$W/bad.pred"
expect_err "bad predictor file" 1 "not a predictor file" \
	"$MI" predict "$MODEL" --predictor "$W/bad.pred"
expect_err "missing predictor file" 1 "No such file" \
	"$MI" predict "$MODEL" --predictor "$W/none.pred"
echo '{' >"$W/bad.json"
expect_err "bad plan file" 1 "bad.json" "$MI" predict "$MODEL" --plan "$W/bad.json"

if [ "$fails" -ne 0 ]; then
	echo "test-predict-cli: $fails failed"
	exit 1
fi
echo "test-predict-cli: all passed"
