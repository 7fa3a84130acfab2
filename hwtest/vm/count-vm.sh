#!/bin/sh
# `make count-vm`: runs inside the soft-RoCE guest. Counts, rather than
# times, what Debian's C perftest and ibgo perf do per message for one test
# (COUNT_ARGS, default: send_bw -c UD -s 1024 -n 20000), both sides in one
# guest: read(2) and write(2) calls (/proc/PID/io syscr/syscw; the rxe send
# doorbell is one write(2) of POST_SEND), context switches, page faults and
# CPU time (wait4's rusage, read by busybox time -v), and the rxe0 port
# counters over the run. Timing on a shared TCG host is noise; these counts
# are not.
set -e
. /ibgo/lib.sh
TEST=${COUNT_TEST:-send_bw}
ARGS=${COUNT_ARGS:--c UD -s 1024 -n 20000}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
cp "$(command -v ibgo)" /tmp/ibgo
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
port=21000
hc=/sys/class/infiniband/rxe0/ports/1/hw_counters

# measured OUT CMD...: run CMD in a shell that reports the read/write calls
# of the children it reaped (the kernel adds a reaped child's I/O accounting
# to its parent's) and, via busybox time -v, the child's rusage.
measured() {
	out=$1; shift
	sh -c 'a=$(sed -n "s/^\(sysc[rw]\): //p" /proc/$$/io | tr "\n" " ")
		busybox time -v "$@" 2>"$0.time" >"$0.log"; rc=$?
		b=$(sed -n "s/^\(sysc[rw]\): //p" /proc/$$/io | tr "\n" " ")
		echo "$a $b" >"$0.io"; exit $rc' "$out" "$@"
}

counters() { for f in "$hc"/*; do printf '%s=%s ' "${f##*/}" "$(cat "$f")"; done; }

# guest SNAP: the guest-wide context switches, and per kind the interrupts
# (IPIs: RES reschedule, CAL function call, TLB shootdown; LOC timer) and
# softirqs summed over the CPUs.
guest() {
	awk '/^ctxt/ {print "ctxt", $2}' /proc/stat
	awk 'NR > 1 {s = 0; for (i = 2; i <= 3; i++) s += $i; sub(":", "", $1); print "irq." $1, s}' /proc/interrupts
	awk 'NR > 1 {s = 0; for (i = 2; i <= NF; i++) s += $i; sub(":", "", $1); print "softirq." $1, s}' /proc/softirqs
}

# report SIDE FILE: per message numbers of one side.
report() {
	awk -v side="$1" -v n="$N" -v io="$(cat "$2.io")" '
		BEGIN { split(io, v, " "); r = v[3] - v[1]; w = v[4] - v[2] }
		/Voluntary context/ { vcs = $NF } /Involuntary context/ { ics = $NF }
		/Minor/ { mf = $NF } /User time/ { ut = $NF } /System time/ { st = $NF } /Elapsed/ { el = $NF }
		END { printf "  %-7s read %7d (%.3f/msg)  write %7d (%.3f/msg)  vcsw %6d (%.4f/msg)  ivcsw %6d  minflt %6d  user %5.2fs sys %5.2fs (%.1f us/msg) wall %s\n",
			side, r, r / n, w, w / n, vcs, vcs / n, ics, mf, ut, st, (ut + st) * 1e6 / n, el }' "$2.time"
}

# threads: while the pair runs, snapshot each thread's context switches
# (the last snapshot before exit stands for the run) to attribute them.
threads() {
	while :; do
		for d in /proc/[0-9]*; do
			case $(readlink "$d/exe" 2>/dev/null) in */ibgo|*/ib_*) ;; *) continue ;; esac
			for t in "$d"/task/*; do
				echo "${d#/proc/}/${t##*/} $(sed -n 's/^\(nonv\|v\)oluntary_ctxt_switches:[[:space:]]*//p' "$t/status" 2>/dev/null | tr '\n' ' ')"
			done
		done 2>/dev/null | awk 'NF == 3' >>/tmp/thr.all
		sleep 0.5
	done
}

N=$(echo "$ARGS" | sed -n 's/.*-n \([0-9]*\).*/\1/p')
for impl in ${COUNT_IMPLS:-c go c go}; do
	port=$((port + 1))
	case $impl in c) bin="ib_$TEST" ;; *) bin="/tmp/ibgo perf $TEST" ;; esac
	c0=$(counters); guest >/tmp/g0
	ls /proc | grep "^[0-9]" >/tmp/thr.before; : >/tmp/thr.all; threads & thr=$!
	# shellcheck disable=SC2086
	try=1
	while :; do
		# shellcheck disable=SC2086
		measured /tmp/cnt.srv $bin -d rxe0 -x "$gidx" -p $port $ARGS &
		srv=$!
		waitport $port
		crc=0 src=0
		# shellcheck disable=SC2086
		measured /tmp/cnt.cli $bin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" || crc=$?
		wait $srv || src=$?
		[ $crc -ne 0 ] || [ $src -ne 0 ] || break
		# C perftest refuses to report when its clock calibration fails
		# under load: run the pair again (at most three times).
		if [ $try -lt 3 ] && grep -q "Can.t produce a report" /tmp/cnt.cli.log /tmp/cnt.srv.log /tmp/cnt.cli.time /tmp/cnt.srv.time; then
			try=$((try + 1)) port=$((port + 1))
			continue
		fi
		cat /tmp/cnt.cli.log /tmp/cnt.cli.time /tmp/cnt.srv.log /tmp/cnt.srv.time; exit 1
	done
	c1=$(counters); guest >/tmp/g1
	kill $thr; wait $thr 2>/dev/null || true
	echo "  threads (pid/tid voluntary involuntary, last seen): $(awk 'NR == FNR {old[$1]; next} {split($1, p, "/")} !(p[1] in old) {last[$1] = $2 " " $3} END {for (t in last) printf "%s %s; ", t, last[t]}' /tmp/thr.before /tmp/thr.all)"
	echo "== $impl $TEST $ARGS: $(awk '/^ #bytes/ {r=1; next} r && NF > 3 {print $4 " MB/s"; exit}' /tmp/cnt.cli.log)"
	report client /tmp/cnt.cli
	report server /tmp/cnt.srv
	echo "$c0" | tr ' ' '\n' >/tmp/c0; echo "$c1" | tr ' ' '\n' >/tmp/c1
	echo "  rxe0 counters changed: $(paste -d= /tmp/c0 /tmp/c1 | awk -F= '$2 != $4 && $1 != "" {printf "%s+%d ", $1, $4 - $2}')"
	echo "  guest (per msg): $(paste -d' ' /tmp/g0 /tmp/g1 | awk -v n="$N" '$4 - $2 > n / 1000 {printf "%s %.3f  ", $1, ($4 - $2) / n}')"
done
