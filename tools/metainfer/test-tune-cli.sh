#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `metainfer tune`: writes a plan that `metainfer run --plan` runs and
# `metainfer predict --plan` reads, prints the default and the tuned
# plan's predicted and measured latency, memory and cosine and the three
# times; the tuned plan is never slower than the default on its own
# verification runs; every bad argument (weights, device, infeasible
# limits, option values) gets one line on stderr and a non-zero exit
# status (1 bad input, 2 usage).
set -u
MI=${1:-build/metainfer}
MODEL=${2:?usage: test-tune-cli.sh METAINFER MODEL.onnx}
W=$(mktemp -d /tmp/mi-tune-cli.XXXXXX)
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
	lines=$(grep -c . "$W/err")
	if [ "$rc" != "$want" ]; then
		fail "$desc (exit $rc, expected $want): $(head -c 300 "$W/err")"
	elif [ "$lines" != 1 ]; then
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

expect_ok "help" "$MI" tune --help
grep -q "usage: .* tune MODEL.onnx" "$W/out" || fail "help text"
start=$(date +%s.%N)
expect_ok "tune" "$MI" tune "$MODEL" -t 1 --top 3 --runs 3 -o "$W/plan.json"
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" 'BEGIN { printf "     tune took %.2f s\n", b - a }'
cp "$W/out" "$W/tune.out"
grep -q "tune: verify" "$W/err" || fail "no progress line on stderr"
for row in default tuned; do
	grep -Eq "^$row +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" "$W/tune.out" ||
		fail "no $row row with predicted/measured ms, MiB, cosine: $(cat "$W/tune.out")"
done
grep -Eq "^time: search [0-9.]+ s .*compile [0-9.]+ s, run [0-9.]+ s" "$W/tune.out" ||
	fail "no time line"
d=$(awk '$1 == "default" { print $3 }' "$W/tune.out")
t=$(awk '$1 == "tuned" { print $3 }' "$W/tune.out")
if awk -v d="$d" -v t="$t" 'BEGIN { exit !(t <= d) }'; then
	pass "tuned $t ms <= default $d ms on the verification runs"
else
	fail "tuned $t ms slower than default $d ms"
fi
[ -s "$W/plan.json" ] && grep -q '"metainfer-plan/' "$W/plan.json" ||
	fail "no plan file"
expect_ok "run --plan" "$MI" run "$MODEL" -t 1 --plan "$W/plan.json"
expect_ok "predict --plan" "$MI" predict "$MODEL" -t 1 --plan "$W/plan.json"
expect_ok "weights, memory limit, budget" "$MI" tune "$MODEL" -t 1 -q \
	--weights 1,0.5,0 --max-mem 4G --budget 30 --top 2 --runs 2 \
	-o "$W/plan2.json"
[ -s "$W/err" ] && fail "-q still writes to stderr: $(head -c 200 "$W/err")"

expect_err "no model" 2 "expected one MODEL.onnx" "$MI" tune -o "$W/x.json"
expect_err "no output" 2 "-o PLAN.json is required" "$MI" tune "$MODEL"
expect_err "bad option" 2 "bad option '--bogus'" "$MI" tune "$MODEL" --bogus -o "$W/x.json"
expect_err "bad weights" 2 "bad --weights" "$MI" tune "$MODEL" --weights 1,x,0 -o "$W/x.json"
expect_err "two weights" 2 "bad --weights" "$MI" tune "$MODEL" --weights 1,1 -o "$W/x.json"
expect_err "negative weight" 2 "bad --weights" "$MI" tune "$MODEL" --weights 1,-1,0 -o "$W/x.json"
expect_err "zero weights" 2 "bad --weights" "$MI" tune "$MODEL" --weights 0,0,0 -o "$W/x.json"
expect_err "bad max-mem" 2 "bad --max-mem" "$MI" tune "$MODEL" --max-mem 12Q -o "$W/x.json"
expect_err "bad min-cosine" 2 "bad --min-cosine" "$MI" tune "$MODEL" --min-cosine 1.5 -o "$W/x.json"
expect_err "bad budget" 2 "bad --budget" "$MI" tune "$MODEL" --budget 0 -o "$W/x.json"
expect_err "bad top" 2 "bad --top" "$MI" tune "$MODEL" --top 0 -o "$W/x.json"
expect_err "bad threads" 2 "bad thread count" "$MI" tune "$MODEL" -t x -o "$W/x.json"
expect_err "unknown device" 1 "nodev9" "$MI" tune "$MODEL" -q --devices nodev9 -o "$W/x.json"
expect_err "missing model" 1 "no-such.onnx" "$MI" tune "$W/no-such.onnx" -q -o "$W/x.json"
expect_err "infeasible memory limit" 1 "no plan meets the limits" \
	"$MI" tune "$MODEL" -t 1 -q --max-mem 1k --runs 1 -o "$W/x.json"
[ -e "$W/x.json" ] && fail "an infeasible search wrote a plan"
echo "not a predictor" >"$W/bad.pred"
expect_err "bad predictor file" 1 "not a predictor file" \
	"$MI" tune "$MODEL" -q --predictor "$W/bad.pred" -o "$W/x.json"
expect_err "unwritable output" 1 "cannot write" \
	"$MI" tune "$MODEL" -t 1 -q --top 1 --runs 1 -o "$W/no/dir/x.json"

# Hardware intents: in the model's metadata (tools/models/intent.py) and
# with --intent; tune and plan --explain name them; a bad one is one line.
PY=${PYTHON:-/usr/bin/python3}
ADD="$(dirname "$0")/../models/intent.py"
expect_ok "intent.py --add" "$PY" "$ADD" "$MODEL" -o "$W/int.onnx" \
	--add 'all=MEMORY_CONSTRAINED:*:weight=2,precisions=fp32'
expect_ok "intent.py --list" "$PY" "$ADD" "$W/int.onnx" --list
grep -qx 'all=MEMORY_CONSTRAINED:\*:weight=2,precisions=fp32' "$W/out" ||
	fail "intent.py --list: $(cat "$W/out")"
expect_ok "tune with the model's intent" "$MI" tune "$W/int.onnx" -t 1 -q \
	--top 2 --runs 2 -o "$W/plan3.json"
grep -Eq '^intent all: MEMORY_CONSTRAINED on [0-9]+ nodes \(\*\), weight 2, precisions fp32' \
	"$W/out" || fail "tune does not name the intent: $(head -c 300 "$W/out")"
grep -Eq '^tuned .* [0-9.]+ +$|^tuned .* [0-9.]+  ' "$W/out" ||
	fail "no region column on the tuned row: $(grep ^tuned "$W/out")"
expect_ok "plan --explain with intents" "$MI" plan "$W/int.onnx" --explain
grep -q '^intent all: MEMORY_CONSTRAINED' "$W/out" && grep -q '\[intents: all\]' "$W/out" ||
	fail "plan --explain does not show the intent"
expect_ok "--intent besides the model's" "$MI" tune "$W/int.onnx" -t 1 -q \
	--top 1 --runs 1 --intent 'fast=LATENCY_CRITICAL:*:weight=8' -o "$W/plan4.json"
grep -q '^intent fast: LATENCY_CRITICAL' "$W/out" || fail "--intent not shown"
expect_err "intent.py: unknown intent" 2 "unknown intent 'FAST'" \
	"$PY" "$ADD" "$MODEL" -o "$W/y.onnx" --add 'a=FAST:*'
expect_err "intent.py: unknown node" 2 "unknown node 'nosuch'" \
	"$PY" "$ADD" "$MODEL" -o "$W/y.onnx" --add 'a=POWER_SENSITIVE:nosuch'
expect_err "--intent: unknown intent" 1 "unknown intent 'FAST'" \
	"$MI" tune "$MODEL" -q --intent 'a=FAST:*' -o "$W/x.json"
expect_err "--intent: unknown node" 1 "unknown node 'nosuch'" \
	"$MI" tune "$MODEL" -q --intent 'a=MEMORY_CONSTRAINED:nosuch' -o "$W/x.json"
expect_err "--intent: unknown option" 1 "unknown option 'speed'" \
	"$MI" tune "$MODEL" -q --intent 'a=MEMORY_CONSTRAINED:*:speed=9' -o "$W/x.json"
expect_err "--intent: not NAME=SPEC" 1 "is not NAME=KIND" \
	"$MI" tune "$MODEL" -q --intent 'MEMORY_CONSTRAINED' -o "$W/x.json"
expect_err "--intent: the model's name again" 1 "given twice" \
	"$MI" tune "$W/int.onnx" -q --intent 'all=POWER_SENSITIVE:*' -o "$W/x.json"
expect_err "intent: impossible region limit" 1 "max_mem" \
	"$MI" tune "$MODEL" -t 1 -q --runs 1 \
	--intent 'm=MEMORY_CONSTRAINED:*:max_mem=1k' -o "$W/x.json"
expect_err "intent: precision no node can meet" 1 "allows int8" \
	"$MI" tune "$MODEL" -t 1 -q --runs 1 \
	--intent 'p=LATENCY_CRITICAL:*:precisions=int8' -o "$W/x.json"
# a key under metainfer.intent that is not metainfer.intent.<name>
"$PY" - "$MODEL" "$W/badkey.onnx" <<'PYEOF'
import sys, onnx
m = onnx.load(sys.argv[1])
m.metadata_props.add(key="metainfer.intents", value="x")
onnx.save(m, sys.argv[2])
PYEOF
expect_err "unknown metadata key" 1 "unknown metadata key 'metainfer.intents'" \
	"$MI" tune "$W/badkey.onnx" -q -o "$W/x.json"
expect_err "plan --explain: unknown metadata key" 1 "unknown metadata key" \
	"$MI" plan "$W/badkey.onnx" --explain
[ -e "$W/x.json" ] && fail "a bad intent wrote a plan"

if [ "$fails" -ne 0 ]; then
	echo "test-tune-cli: $fails failed"
	exit 1
fi
echo "test-tune-cli: all passed"
