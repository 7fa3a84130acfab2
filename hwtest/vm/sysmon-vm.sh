#!/bin/sh
# `make sysmon-vm`: runs inside the soft-RoCE guest (issue 16: why ibgo's UD
# send_bw trails C perftest's). Per round, each of IMPLS in turn (the order
# rotates and reverses from round to round): c is Debian's C perftest pair as is, cw the
# same pair with /out/waker.so preloaded into both processes (one extra
# thread each that wakes every 10 ms, as the Go runtime's sysmon does while
# a goroutine runs), cws and cwc the waker in the server or the client only,
# go ibgo's pair, cs a C server with an ibgo client, gs
# an ibgo server with a C client (which side a gap follows), go0 the build
# at /out/ibgo-before (an A/B of two builds; added to the default IMPLS when
# it is there). PIN=1 (the default) puts every server on vCPU 0 and every
# client on vCPU 1 (taskset, all threads), which removes the two-mode spread
# of unpinned runs (both spinners on one vCPU or not). Prints each round
# (ROUND r c=... cw=...) and, per implementation, the median of its number
# and the median over rounds of its number over c's in the same round.
# TEST (send_bw by default) picks another perftest test: a *_bw test's
# number is the client's BW average in MB/s, a *_lat test's its typical
# latency in usec (t_typical; lower is better).
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-30}
TEST=${TEST:-send_bw}
case $TEST in
*_lat) ARGS=${SYSMON_ARGS:--s 2 -n 20000} col=5 unit=usec ;;
*) ARGS=${SYSMON_ARGS:--c UD -s 1024 -n 5000} col=4 unit=MB/s ;;
esac
[ -r /out/waker.so ] || { echo "no /out/waker.so (make sysmon-vm builds it)"; exit 1; }
cp /out/waker.so /tmp/waker.so
cp "$(command -v ibgo)" /tmp/ibgo
[ ! -x /out/ibgo-before ] || cp /out/ibgo-before /tmp/ibgo-before
if [ -z "$IMPLS" ]; then
	IMPLS="c cw go"
	[ ! -x /tmp/ibgo-before ] || IMPLS="$IMPLS go0"
fi
for impl in $IMPLS; do
	case $impl in
	c | cw | cws | cwc | go | cs | gs) ;;
	go0) [ -x /tmp/ibgo-before ] || { echo "go0 needs /out/ibgo-before (SYSMON_BEFORE=...)"; exit 1; } ;;
	*) echo "unknown implementation $impl (c cw cws cwc go cs gs go0)"; exit 1 ;;
	esac
done
case " $IMPLS " in *" c "*) ;; *) echo "IMPLS must include c, the reference"; exit 1 ;; esac
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
TS0="" TS1=""
if [ "${PIN:-1}" = 1 ]; then
	TS0="taskset -c 0" TS1="taskset -c 1"
fi
port=22000

# one IMPL PORT: one $TEST pair on PORT, prints the client's number (column
# $col). It runs in a command substitution: the caller counts the ports.
one() {
	port=$2
	pre="" srvpre="" srvbin=""
	case $1 in
	c) bin=ib_$TEST ;;
	cw) bin=ib_$TEST pre=LD_PRELOAD=/tmp/waker.so srvpre=LD_PRELOAD=/tmp/waker.so ;;
	cws) bin=ib_$TEST srvpre=LD_PRELOAD=/tmp/waker.so ;;
	cwc) bin=ib_$TEST pre=LD_PRELOAD=/tmp/waker.so ;;
	go) bin="/tmp/ibgo perf $TEST" ;;
	cs) bin="/tmp/ibgo perf $TEST" srvbin=ib_$TEST ;;
	gs) bin=ib_$TEST srvbin="/tmp/ibgo perf $TEST" ;;
	go0) bin="/tmp/ibgo-before perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	$TS0 env $srvpre ${srvbin:-$bin} -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/s.srv 2>&1 &
	srv=$!
	waitport $port
	if [ -n "$srvpre" ] && [ "$(ls /proc/$srv/task | wc -l)" -lt 2 ]; then
		echo "the waker did not start in the C server" >&2; exit 1
	fi
	# shellcheck disable=SC2086
	$TS1 env $pre $bin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/s.cli 2>&1 || cat /tmp/s.cli >&2
	wait $srv || cat /tmp/s.srv >&2
	awk -v col=$col '/^ #bytes/ {r = 1; next} r && NF > 3 {print $col; exit}' /tmp/s.cli
}

median() { grep . | sort -n | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }

echo "$TEST $ARGS, $ROUNDS rounds, pinned: ${PIN:-1}, implementations: $IMPLS"
: > /tmp/rounds
r=0
while [ $r -lt "$ROUNDS" ]; do
	# the order rotates by one each round and runs backwards every other
	# round, so no pair always follows the same one
	# shellcheck disable=SC2086
	set -- $IMPLS
	k=$((r % $#))
	while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
	if [ $((r % 2)) -eq 1 ]; then
		rev=""
		for impl in "$@"; do rev="$impl $rev"; done
		# shellcheck disable=SC2086
		set -- $rev
	fi
	line=""
	for impl in "$@"; do
		port=$((port + 1))
		line="$line $impl=$(one "$impl" $port)"
	done
	echo "ROUND $r$line" | tee -a /tmp/rounds
	r=$((r + 1))
done
# ratio A B: per round, A's number over B's (rounds where either is missing
# are left out)
ratio() {
	awk -v a="$1" -v b="$2" '{x = ""; y = ""
		for (k = 3; k <= NF; k++) {split($k, kv, "="); if (kv[1] == a) x = kv[2]; if (kv[1] == b) y = kv[2]}
		if (x != "" && y != "" && y > 0) print x / y}' /tmp/rounds
}
# per implementation: the median of its numbers, and the median over rounds
# of its number over c's in the same round (the lower middle of an even
# count; for a *_lat test above 1 is slower)
for impl in $IMPLS; do
	m=$(awk -v i="$impl" '{for (k = 3; k <= NF; k++) {split($k, kv, "="); if (kv[1] == i && kv[2] != "") print kv[2]}}' /tmp/rounds | median)
	[ "$impl" != c ] || { echo "c: median $m $unit"; continue; }
	rs=$(ratio "$impl" c)
	n=$(echo "$rs" | grep -c . || true)
	above=$(echo "$rs" | awk '$1 > 1' | wc -l)
	echo "$impl: median $m $unit; $impl/c per round: median $(echo "$rs" | median) over $n rounds, above 1 in $above"
done
rs=$(ratio go go0)
if [ -n "$rs" ]; then
	echo "go/go0 (this build over the earlier one) per round: median $(echo "$rs" | median) over $(echo "$rs" | grep -c .) rounds, above 1 in $(echo "$rs" | awk '$1 > 1' | wc -l)"
fi
