#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# test-serve-etcd.sh METAINFER SUPERNET.onnx: `metainfer serve --registry
# etcd://...` on the host.  etcd on 127.0.0.1 (free ports, a temporary data
# dir); two serve processes, nodes a and b, each with its own emulated
# device, the same 4 streams: a claims 0-1, b claims 2-3 (--own), lease TTL
# 2 s.  b is killed with SIGKILL; its lease expires and a adopts streams
# 2 and 3 at the item b had completed; 2 s later a stops on SIGTERM.  Checks: each node sees the other
# join, a sees b leave and adopts both streams, and for every stream etcd's
# done counter equals what the nodes committed (a's count from its
# adoption item on; b's up to it): no item lost or run twice.  Without
# etcd: a SKIP line, exit 0.
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
apid=
bpid=
cleanup() {
	for p in $apid $bpid $epid; do kill -9 "$p" 2>/dev/null; done
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
common=(serve "$MODEL" --streams 4 --emulate 1 --registry "etcd://127.0.0.1:$PC/t"
	--ttl 2 --interval 50 --item-runs 4)
"$BIN" "${common[@]}" --node a --own 0-1 --duration 60 >"$tmp/a" 2>"$tmp/a.err" &
apid=$!
"$BIN" "${common[@]}" --node b --own 2-3 --duration 30 >"$tmp/b" 2>"$tmp/b.err" &
bpid=$!
disown $bpid	# no job-control line when it is killed
# b runs its streams for a while, then dies without a word
for _ in $(seq 100); do
	grep -q '^etcd stream 3: owned, next item [1-9]' "$tmp/b" && break
	sleep 0.1
done
sleep 1
kill -9 $bpid
while kill -0 $bpid 2>/dev/null; do sleep 0.01; done
bpid=
tk=$(date +%s.%N)
# kill -> adoption of both streams, as a prints it
ta=
for _ in $(seq 200); do
	[ "$(grep -c '^etcd: stream . adopted from b' "$tmp/a")" = 2 ] &&
		{ ta=$(date +%s.%N); break; }
	sleep 0.05
done
# a runs them for 2 s, then stops on SIGTERM (summary, lease revoked)
sleep 2
kill -TERM $apid
wait $apid
rc=$?
apid=
left=$(ectl get --prefix --keys-only /metainfer/t/nodes/ | grep -c .)
[ "$left" = 0 ] || fail "$left node keys left after a stopped (lease not revoked)"

[ $rc = 0 ] || fail "node a exited $rc: $(tail -2 "$tmp/a.err")"
grep -q '^etcd: node b joined' "$tmp/a" || fail "a did not see b join"
grep -q '^etcd: node a joined' "$tmp/b" || fail "b did not see a join"
grep -q '^etcd: node b left' "$tmp/a" || fail "a did not see b leave"
for k in 0 1; do
	grep -q "^etcd: stream $k claimed at item 0" "$tmp/a" || fail "a did not claim stream $k"
done
for k in 2 3; do
	grep -q "^etcd: stream $k claimed at item 0" "$tmp/b" || fail "b did not claim stream $k"
	grep -q "^etcd: stream $k adopted from b at item [0-9]" "$tmp/a" ||
		fail "a did not adopt stream $k"
done
grep -q '^summary: .* 0 failed' "$tmp/a" || fail "a: $(grep summary "$tmp/a")"
# every stream: etcd's done = the items committed by whoever owned it
for k in 0 1 2 3; do
	done_e=$(ectl get --print-value-only "/metainfer/t/streams/$k/done")
	owner=$(ectl get --print-value-only "/metainfer/t/streams/$k/owner")
	ca=$(sed -n "s/^etcd stream $k: .*committed here \([0-9]*\),.*/\1/p" "$tmp/a" | tail -1)
	from=$(sed -n "s/^etcd: stream $k adopted from b at item \([0-9]*\).*/\1/p" "$tmp/a")
	[ "$owner" = a ] || fail "stream $k: owner '$owner' at the end, not a"
	[ -n "$done_e" ] && [ "${ca:-0}" -gt 0 ] || { fail "stream $k: done '$done_e', a committed '$ca'"; continue; }
	if [ $k -ge 2 ]; then
		[ $((from + ca)) = "$done_e" ] ||
			fail "stream $k: adopted at $from + $ca committed by a != done $done_e"
		# b's last printed second cannot be ahead of where a took over
		cb=$(sed -n "s/^etcd stream $k: .*committed here \([0-9]*\),.*/\1/p" "$tmp/b" | tail -1)
		[ "${cb:-0}" -le "$from" ] && [ "$from" -gt 0 ] ||
			fail "stream $k: b printed $cb committed, a adopted at $from"
		echo "stream $k: b committed $from items, a $ca after adopting; etcd done $done_e"
	else
		[ "$ca" = "$done_e" ] || fail "stream $k: a committed $ca != done $done_e"
	fi
done
# how long from the kill to the adoption (a's log lines are not timed:
# the watch's "left" line comes 2/3 TTL .. TTL after the kill)
[ -n "$ta" ] || fail "b's streams not adopted within 10 s of the kill"
echo "test-serve-etcd: b killed at +$(awk "BEGIN { printf \"%.1f\", $tk - $t0 }") s; both streams adopted $(awk "BEGIN { printf \"%.2f\", ${ta:-$tk} - $tk }") s after the kill (TTL 2 s)"

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

[ $fails = 0 ] && echo "test-serve-etcd: ok" || {
	echo "test-serve-etcd: FAILED ($fails)"
	echo "--- a"; grep '^etcd\|summary' "$tmp/a" | tail -30
	echo "--- b"; grep '^etcd' "$tmp/b" | tail -20
	cat "$tmp/a.err" "$tmp/b.err"
}
exit $((fails != 0))
