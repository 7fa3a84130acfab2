#!/bin/sh
# `make kcount-vm`: runs inside the soft-RoCE guest. Counts the calls of
# every function of the rdma_rxe module (and the uverbs write and post
# handlers) while Debian's C perftest pair runs one test, then while ibgo's
# pair runs the same (KCOUNT_TEST, default send_bw; KCOUNT_ARGS, default
# -c UD -s 1024 -n 20000), through one kprobe per function and the
# tracefs kprobe_profile hit counts. Prints each function called in either
# run with both counts, and which of those called 1000 times or more (the
# per-message paths; setup makes a few calls more or less) differ by more
# than 1 %: whether ibgo asks the kernel for other work than perftest for
# the same messages. Servers on
# vCPU 0, clients on vCPU 1.
set -e
. /ibgo/lib.sh
TEST=${KCOUNT_TEST:-send_bw}
ARGS=${KCOUNT_ARGS:--c UD -s 1024 -n 20000}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
T=/sys/kernel/tracing
[ -e $T/kprobe_profile ] || mount -t tracefs nodev $T
[ -e $T/kprobe_profile ] || { echo "no kprobe_profile in tracefs"; exit 1; }
funcs=$( (awk '/\[rdma_rxe\]/ {print $1}' $T/available_filter_functions; echo ib_uverbs_write; echo ib_uverbs_post_send; echo ib_uverbs_post_recv) | sort -u)
: > /tmp/probes
n=0
for f in $funcs; do
	n=$((n + 1))
	# Some symbols cannot take a kprobe (inlined, notrace): skip them.
	if echo "p:kc$n $f" >> $T/kprobe_events 2>/dev/null; then echo "kc$n $f" >> /tmp/probes; fi
done
echo 1 > $T/events/kprobes/enable
echo 0 > $T/tracing_on # count only: kprobe_profile counts hits without tracing
echo "$TEST $ARGS: $(wc -l < /tmp/probes) functions probed"
port=24000

# hits OUT: the probes' hit counts, "probe hits" per line
hits() { awk '{print $1, $2}' $T/kprobe_profile | sort > "$1"; }

# one NAME BIN...: one pair of BIN; the hit counts it caused go to /tmp/NAME
one() {
	name=$1; shift
	port=$((port + 1))
	hits /tmp/before
	# shellcheck disable=SC2086
	taskset -c 0 "$@" -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/$name.srv 2>&1 &
	srv=$!
	waitport $port
	# shellcheck disable=SC2086
	taskset -c 1 "$@" -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/$name.cli 2>&1 || { cat /tmp/$name.cli; exit 1; }
	wait $srv || { cat /tmp/$name.srv; exit 1; }
	hits /tmp/after
	awk 'NR == FNR {b[$1] = $2; next} {print $1, $2 - b[$1]}' /tmp/before /tmp/after > /tmp/$name
}

one c "ib_$TEST"
one go ibgo perf "$TEST"
# (the guest's busybox has no join)
awk '
	FILENAME == "/tmp/probes" { fn[$1] = $2; next }
	FILENAME == "/tmp/c" { c[$1] = $2; next }
	{ g = $2; k = c[$1]
	  if (k > 0 || g > 0) {
		printf "%-32s %10d %10d\n", fn[$1], k, g
		d = g - k; if (d < 0) d = -d
		m = k > g ? k : g
		if (m >= 1000 && d > 0.01 * m) { diff++; print "  ^ differs" }
	  } }
	END { printf "functions called 1000 times or more whose counts differ by more than 1 %%: %d\n", diff }' /tmp/probes /tmp/c /tmp/go > /tmp/table
printf "%-32s %10s %10s\n" function C ibgo
sort -k2 -nr /tmp/table | grep -v "^functions\|^  ^" || true
grep "^functions" /tmp/table
grep -B1 "^  ^" /tmp/table || true
