#!/bin/sh
# `make levels-vm`: runs inside the soft-RoCE guest (issue 9: where ibgo's
# send_lat stands against C perftest's). Per round, in turn (the order
# alternates): Debian's C pair and ibgo's pair, pinned (servers on vCPU 0,
# clients on vCPU 1), each with -U so the client prints every sample. Each
# run's samples are cut into windows of WINDOW iterations and each window's
# median printed: this shows whether a run's latency is one level or moves
# between levels during the run. At the end, over all windows of each
# implementation: a count per whole microsecond, and the median of the
# windows inside each BANDS range ("lo-hi" in usec), which compares the
# two on the same level.
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-8}
TEST=${TEST:-send_lat}
ARGS=${LEVELS_ARGS:--s 2 -n 10000}
WINDOW=${WINDOW:-1000}
BANDS=${BANDS:-13.8-15.8 17.3-20.5}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
cp "$(command -v ibgo)" /tmp/ibgo
port=25000
: > /tmp/w.c
: > /tmp/w.go

# median: the middle of the numbers on stdin
median() { sort -n | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }

# one IMPL: one pair with -U; appends the run's window medians to /tmp/w.IMPL
one() {
	port=$((port + 1))
	case $1 in
	c) bin=ib_$TEST ;;
	go) bin="/tmp/ibgo perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	taskset -c 0 $bin -d rxe0 -x "$gidx" -p $port $ARGS -U > /tmp/l.srv 2>&1 &
	srv=$!
	waitport $port
	# shellcheck disable=SC2086
	taskset -c 1 $bin -d rxe0 -x "$gidx" -p $port $ARGS -U "$ip" > /tmp/l.cli 2>&1 || cat /tmp/l.cli >&2
	wait $srv || cat /tmp/l.srv >&2
	# "sample, usec" lines; a run whose clock failed prints inf: skipped
	awk -F', ' -v w="$WINDOW" '/^[0-9]+, [0-9.]+$/ {print int(($1 - 1) / w), $2}' /tmp/l.cli |
		sort -k1,1n -k2,2n |
		awk '$1 != k {flush(); k = $1; n = 0} {v[++n] = $2} END {flush()}
			function flush() {if (n) printf "%s ", v[int((n + 1) / 2)]}' > /tmp/l.win
	printf '%-3s %s\n' "$1" "$(cat /tmp/l.win)"
	tr ' ' '\n' < /tmp/l.win | grep . >> /tmp/w.$1 || true
}

echo "$TEST $ARGS, $ROUNDS rounds, median of each $WINDOW iterations (usec):"
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) -eq 0 ]; then one c; one go; else one go; one c; fi
	r=$((r + 1))
done
for impl in c go; do
	echo "$impl: $(wc -l < /tmp/w.$impl) windows, median $(median < /tmp/w.$impl); per usec:" \
		"$(awk '{n[int($1)]++} END {for (k in n) print k ":" n[k]}' /tmp/w.$impl | sort -n | tr '\n' ' ')"
	for b in $BANDS; do
		lo=${b%-*} hi=${b#*-}
		m=$(awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 < hi' /tmp/w.$impl | median)
		n=$(awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 < hi' /tmp/w.$impl | wc -l)
		echo "  band $b: $n windows, median ${m:--}"
	done
done
