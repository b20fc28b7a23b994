#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# test-serve-etcd.sh METAINFER SUPERNET.onnx: `metainfer serve --registry
# etcd://...` on the host.  etcd on 127.0.0.1 (free ports, a temporary data
# dir); three serve processes, nodes a, b and c, each with its own emulated
# device, the same 6 streams: a claims 0-1, b 2-3, c 4-5 (--own), lease
# TTL 2 s, 4 inferences per item.  c is killed with SIGKILL; its lease
# expires and its two streams are adopted, one by a and one by b (the
# least loaded per available device), at the item c had completed; 2 s
# later a and b stop on SIGTERM.  Checks: the nodes see each other join
# and c leave, the adoptions, the node keys gone after SIGTERM (leases
# revoked), and for every stream etcd's done counter equals the items the
# nodes committed (c's: up to the adoption item): none lost, none twice.
# A fourth node (--json) then adopts all six where a and b left them.
# Then an unreachable etcd and bad options.  Without etcd: SKIP, exit 0.
set -u
BIN=$1
MODEL=$2
PY=/usr/bin/python3
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ETCD=$(command -v etcd || true)
[ -x /usr/bin/etcd ] && ETCD=/usr/bin/etcd
if [ -z "$ETCD" ] || ! command -v etcdctl >/dev/null; then
	echo "test-serve-etcd: SKIP (etcd / etcdctl not installed)"
	exit 0
fi
tmp=$(mktemp -d)
epid=
pids=
cleanup() {
	for p in $pids $epid; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
read -r PC PP < <("$PY" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
UC=http://127.0.0.1:$PC
UP=http://127.0.0.1:$PP
"$ETCD" --name t --data-dir "$tmp/etcd" --listen-client-urls "$UC" \
	--advertise-client-urls "$UC" --listen-peer-urls "$UP" \
	--initial-advertise-peer-urls "$UP" --initial-cluster "t=$UP" \
	--logger zap --log-level warn >"$tmp/etcd.log" 2>&1 &
epid=$!
ectl() { ETCDCTL_API=3 etcdctl --endpoints="$UC" "$@"; }
for _ in $(seq 100); do ectl get /x >/dev/null 2>&1 && break; sleep 0.1; done
ectl get /x >/dev/null 2>&1 || { fail "etcd did not come up: $(tail -3 "$tmp/etcd.log")"; exit 1; }

t0=$(date +%s.%N)
common=(serve "$MODEL" --streams 6 --emulate 1 --registry "etcd://127.0.0.1:$PC/t"
	--ttl 2 --interval 50 --item-runs 4 --duration 60)
declare -A pid own=([a]=0-1 [b]=2-3 [c]=4-5)
for n in a b c; do
	"$BIN" "${common[@]}" --node $n --own ${own[$n]} >"$tmp/$n" 2>"$tmp/$n.err" &
	pid[$n]=$!
	disown ${pid[$n]}	# no job-control line when one is killed
	pids="$pids ${pid[$n]}"
done
# c runs its streams for a while, then dies without a word
for _ in $(seq 150); do
	grep -q '^etcd stream 5: owned, next item [1-9]' "$tmp/c" && break
	sleep 0.1
done
sleep 1
kill -9 ${pid[c]}
while kill -0 ${pid[c]} 2>/dev/null; do sleep 0.01; done
tk=$(date +%s.%N)
# kill -> adoption of both streams, as a and b print it
ta=
for _ in $(seq 200); do
	[ "$(cat "$tmp/a" "$tmp/b" | grep -c '^etcd: stream . adopted from c')" = 2 ] &&
		{ ta=$(date +%s.%N); break; }
	sleep 0.05
done
# a and b run them for 2 s, then stop on SIGTERM (summary, lease revoked)
sleep 2
kill -TERM ${pid[a]} ${pid[b]}
for n in a b; do
	for _ in $(seq 200); do kill -0 ${pid[$n]} 2>/dev/null || break; sleep 0.05; done
	kill -0 ${pid[$n]} 2>/dev/null && fail "$n did not stop on SIGTERM"
	grep -q '^etcd summary: ' "$tmp/$n" || fail "$n printed no etcd summary: $(tail -2 "$tmp/$n.err")"
	grep -q '^summary: .* 0 failed' "$tmp/$n" || fail "$n: $(grep '^summary' "$tmp/$n")"
done
left=$(ectl get --prefix --keys-only /metainfer/t/nodes/ | grep -c .)
[ "$left" = 0 ] || fail "$left node keys left after a and b stopped (leases not revoked)"

for n in a b c; do
	for m in a b c; do
		[ $n = $m ] || grep -q "^etcd: node $m joined" "$tmp/$n" || fail "$n did not see $m join"
	done
done
for n in a b; do
	grep -q '^etcd: node c left' "$tmp/$n" || fail "$n did not see c leave"
	[ "$(grep -c '^etcd: stream . adopted from c' "$tmp/$n")" = 1 ] ||
		fail "$n adopted $(grep -c '^etcd: stream . adopted from c' "$tmp/$n") of c's streams, not 1"
done
[ -n "$ta" ] || fail "c's streams not adopted within 10 s of the kill"
# every stream: etcd's done = the items committed by a and b (their final
# counts) + c's (the item its stream was adopted at)
committed() {	# NODE STREAM: the node's last count for the stream
	sed -n "s/^etcd stream $2: .*committed here \([0-9]*\),.*/\1/p" "$tmp/$1" | tail -1
}
for k in 0 1 2 3 4 5; do
	done_e=$(ectl get --print-value-only "/metainfer/t/streams/$k/done")
	ca=$(committed a $k)
	cb=$(committed b $k)
	sum=$((${ca:-0} + ${cb:-0}))
	from=
	if [ $k -ge 4 ]; then
		from=$(cat "$tmp/a" "$tmp/b" | sed -n "s/^etcd: stream $k adopted from c at item \([0-9]*\).*/\1/p")
		cc=$(committed c $k)
		[ -n "$from" ] && [ "$from" -gt 0 ] && [ "${cc:-0}" -le "$from" ] ||
			fail "stream $k: c printed ${cc:-0} committed, adopted at '$from'"
		sum=$((sum + ${from:-0}))
	fi
	[ -n "$done_e" ] && [ "$sum" = "$done_e" ] && [ "$sum" -gt "${from:-0}" ] ||
		fail "stream $k: etcd done '$done_e' != a ${ca:-0} + b ${cb:-0} + c ${from:-0}"
	echo "stream $k: committed by c ${from:--}, a ${ca:-0}, b ${cb:-0}; etcd done $done_e" |
		tee -a "$tmp/summary"
done
echo "test-serve-etcd: c killed at +$(awk "BEGIN { printf \"%.1f\", $tk - $t0 }") s; both its streams adopted $(awk "BEGIN { printf \"%.2f\", ${ta:-$tk} - $tk }") s after the kill (TTL 2 s)"

# a fourth node with --json after a and b stopped: it adopts all six
# streams where they were left (their owners' leases were revoked) and
# goes on; every line is JSON
"$BIN" "${common[@]}" --node d --own none --json --duration 2 >"$tmp/d" 2>"$tmp/d.err" ||
	fail "node d exited $?: $(tail -2 "$tmp/d.err")"
"$PY" - "$tmp/d" <<'PYEOF' || fail "node d's JSON output"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ad = [l for l in lines if l.get("etcd_event") == "adopted"]
fin = [l["etcd"] for l in lines if "etcd" in l and l["etcd"]["final"]]
assert sorted(l["stream"] for l in ad) == list(range(6)), ad
assert len(fin) == 1 and all(s["owned"] and s["committed"] > 0 for s in fin[0]["streams"]), fin
PYEOF
for k in 0 1 2 3 4 5; do
	before=$(sed -n "s/^stream $k: .*etcd done \([0-9]*\)$/\1/p" "$tmp/summary")
	from=$("$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    l = json.loads(l)
    if l.get("etcd_event") == "adopted" and l["stream"] == int(sys.argv[2]): print(l["item"])' "$tmp/d" "$k")
	[ "$from" = "$before" ] || fail "stream $k: d adopted at '$from', etcd had done $before"
done

# etcd not there: one line, every stream runs locally; a bad spec: one line
"$BIN" serve "$MODEL" --registry "etcd://127.0.0.1:1/t" --duration 1 -q \
	>"$tmp/o" 2>"$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "running every stream on local state" "$tmp/err" &&
	grep -q '^summary: [1-9][0-9]* runs, 0 failed' "$tmp/o" ||
	fail "etcd unreachable: rc $rc: $(cat "$tmp/err")"
"$BIN" serve "$MODEL" --registry "zk://x" --duration 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "bad --registry: rc $rc: $(cat "$tmp/err")"
"$BIN" serve "$MODEL" --own 3-1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "bad --own: rc $rc"
"$BIN" serve "$MODEL" --item-runs 0 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "bad --item-runs: rc $rc"

[ $fails = 0 ] && echo "test-serve-etcd: ok" || {
	echo "test-serve-etcd: FAILED ($fails)"
	for n in a b c; do echo "--- $n"; grep '^etcd\|^summary' "$tmp/$n" | tail -25; cat "$tmp/$n.err"; done
}
exit $((fails != 0))
