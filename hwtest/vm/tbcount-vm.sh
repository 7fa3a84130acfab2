#!/bin/sh
# `make tbcount-vm`: runs inside the soft-RoCE guest under the tbcount qemu
# plugin (hwtest/experiments/tbcount.c), which counts how often each
# translated block runs (issue 9: what each implementation executes per
# round trip). Per round: Debian's C pair, then ibgo's pair, pinned (server
# on vCPU 0, client on vCPU 1), of TEST (send_lat) with ARGS; DELAY seconds
# after the client starts the counts are zeroed and WIN seconds later
# dumped to /out/<impl><round>.tbc, so setup and teardown stay out. The
# server's /proc/PID/maps, /proc/kallsyms and the ibgo binary go to /out
# too, for `go run ./hwtest/vm/tbcount` (the make target runs it) to name
# what ran. ASLR is off so both processes of a pair map alike.
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-2}
TEST=${TEST:-send_lat}
ARGS=${TB_ARGS:--s 2 -n 100000}
DELAY=${DELAY:-1}
WIN=${WIN:-0.5}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
echo 0 > /proc/sys/kernel/randomize_va_space
cp "$(command -v ibgo)" /tmp/ibgo
cp /tmp/ibgo /out/ibgo
cat /proc/kallsyms > /out/kallsyms
port=25400

# ctl CMD: hands CMD to the plugin and waits until it took it (it removes
# the file), at most 20 s.
ctl() {
	echo "$1" > /out/tbcmd
	i=0
	while [ -e /out/tbcmd ]; do
		i=$((i + 1)); [ $i -lt 400 ] || { echo "the tbcount plugin did not answer (is it loaded?)"; exit 1; }
		sleep 0.05
	done
}

# one NAME: one pair (NAME c... or go...), counted for WIN seconds
one() {
	port=$((port + 1))
	case $1 in
	c*) bin=ib_$TEST ;;
	go*) bin="/tmp/ibgo perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	taskset -c 0 $bin -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/t.srv 2>&1 &
	srv=$!
	waitport $port
	cat /proc/$srv/maps > /out/$1.maps
	# shellcheck disable=SC2086
	taskset -c 1 $bin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/t.cli 2>&1 &
	cli=$!
	sleep "$DELAY"
	kill -0 $cli 2>/dev/null || { cat /tmp/t.cli; echo "$1: the client ended before the window (raise the iterations)"; exit 1; }
	ctl reset
	sleep "$WIN"
	ctl "dump $1"
	kill -0 $cli 2>/dev/null || { echo "$1: the client ended inside the window (raise the iterations)"; exit 1; }
	wait $cli || { cat /tmp/t.cli; exit 1; }
	wait $srv || { cat /tmp/t.srv; exit 1; }
	echo "$1: $(grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/t.cli | head -n 1)"
}

r=1
while [ $r -le "$ROUNDS" ]; do
	one c$r
	one go$r
	r=$((r + 1))
done
