#!/bin/sh
# `make threads-vm`: runs inside the soft-RoCE guest (issues 9 and 16: where
# the CPU of each side goes). Per round, Debian's C pair and then ibgo's
# pair run one test (THREADS_TEST, default send_bw; THREADS_ARGS, default
# -c UD -s 1024 -D 5), pinned (server on vCPU 0, client on vCPU 1). For one
# second in the middle of each run it reads the scheduler's statistics of
# every thread of both processes and of the kernel threads that share their
# vCPUs (ksoftirqd, rcu_preempt, kworkers, migration), and prints for each
# thread that ran over 1 ms: the time it ran, the time it waited runnable
# for its vCPU, and how many times it was scheduled in. It reads with shell
# builtins only, so the reading itself adds no processes to the vCPUs.
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-2}
TEST=${THREADS_TEST:-send_bw}
ARGS=${THREADS_ARGS:--c UD -s 1024 -D 5}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
port=26400
kt=""
for p in /proc/[0-9]*; do
	read -r c < "$p/comm" || continue
	case $c in ksoftirqd/* | rcu_preempt | kworker/[01]:* | migration/*) kt="$kt ${p#/proc/}:$c" ;; esac
done

# snap CLI SRV: "name run_ns wait_ns slices" for every thread of interest
snap() {
	for e in $kt; do read -r r w s < "/proc/${e%%:*}/schedstat" && echo "${e#*:} $r $w $s"; done
	for t in /proc/"$1"/task/*; do read -r r w s < "$t/schedstat" && echo "client:${t##*/} $r $w $s"; done
	for t in /proc/"$2"/task/*; do read -r r w s < "$t/schedstat" && echo "server:${t##*/} $r $w $s"; done
	return 0 # a thread that ended between the listing and the read is left out
}

one() {
	port=$((port + 1))
	case $1 in
	c) bin=ib_$TEST ;;
	go) bin="ibgo perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	taskset -c 0 $bin -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/t.srv 2>&1 &
	srv=$!
	waitport $port
	# shellcheck disable=SC2086
	taskset -c 1 $bin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/t.cli 2>&1 &
	cli=$!
	sleep 1.5
	snap $cli $srv > /tmp/t0
	sleep 1
	snap $cli $srv > /tmp/t1
	wait $cli || cat /tmp/t.cli >&2
	wait $srv || cat /tmp/t.srv >&2
	echo "$1: client's result $(awk '/^ #bytes/ {r = 1; next} r && NF > 3 {print $4; exit}' /tmp/t.cli); over one second: thread run_ms wait_ms scheduled"
	awk 'NR == FNR {r[$1] = $2; w[$1] = $3; s[$1] = $4; next}
		($1 in r) && $2 - r[$1] > 1e6 {printf "  %-22s %7.1f %6.1f %6d\n", $1, ($2 - r[$1]) / 1e6, ($3 - w[$1]) / 1e6, $4 - s[$1]}' /tmp/t0 /tmp/t1 |
		sort -k2 -n -r
}

echo "$TEST $ARGS, $ROUNDS rounds; clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
round=0
while [ $round -lt "$ROUNDS" ]; do
	one c
	one go
	round=$((round + 1))
done
