#!/bin/sh
# `make demo`: runs inside the soft-RoCE guest (busybox sh), with ibgo and
# Debian's rdma-core tools on PATH. Exits non-zero if anything disagrees.
set -e
. /ibgo/lib.sh
say() { printf '\n==== %s\n' "$*"; }
cp "$(command -v ibgo)" /tmp/ibgo

# The first part of `make demo`: what ibgo is for. Two `ibgo driver`s stand for two
# hosts; over each channel a publisher on one sends N messages that carry
# their sequence numbers, a subscriber on the other checks every one
# arrives once and in order, and a ping/pong pair measures round trips.
# The table: messages per second (publisher start to the last message
# received), RTT p50/p99, and the receiving driver's CPU time per message
# (its utime+stime from /proc over the run). Then the subscriber driver's
# counters (ibgo aeron stat, aeron:ib's own among them) and both error
# logs, which must be empty. Exits non-zero if anything is lost, out of
# order or logged as an error.

demo_aeron() {
	N=${DEMO_MESSAGES:-100000}
	PINGS=${DEMO_PINGS:-1000}
	ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
	I=/tmp/ibgo
	pubdir=/dev/shm/demo-pub subdir=/dev/shm/demo-sub
	rm -rf $pubdir $subdir
	say "Aeron over InfiniBand verbs: two ibgo media drivers (standing for two hosts) in the soft-RoCE guest"
	echo "Aeron is a messaging system: applications publish and subscribe to streams on channels; a media"
	echo "driver per host moves the messages. ibgo's driver adds aeron:ib (RDMA verbs, UD or RC) beside"
	echo "Aeron's aeron:udp, and Aeron's own C and Java clients can use it in place of aeronmd."
	$I driver --dir $pubdir --dir-delete-on-shutdown >/tmp/demo-pub.log 2>&1 &
	pubdrv=$!
	$I driver --dir $subdir --dir-delete-on-shutdown >/tmp/demo-sub.log 2>&1 &
	subdrv=$!
	i=0
	while { [ ! -e $pubdir/cnc.dat ] || [ ! -e $subdir/cnc.dat ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 0.3
	echo
	head -n 1 /tmp/demo-sub.log
	: >/tmp/demo-table
	port=24400
	for ch in "aeron:ib UD|" "aeron:ib RC||ib-qp=rc" "aeron:udp|"; do
		name=${ch%%|*} extra=${ch#*|}
		media=ib
		[ "$name" = "aeron:udp" ] && media=udp
		port=$((port + 3))
		c="aeron:$media?endpoint=$ip:$port|mtu=4096|rcv-wnd=2m$extra"
		pc="aeron:$media?endpoint=$ip:$((port + 1))$extra"
		qc="aeron:$media?endpoint=$ip:$((port + 2))$extra"
		echo
		echo "-- $name: $N messages of 256 bytes on $c"
		cpu0=$(awk '{print $14 + $15}' /proc/$subdrv/stat)
		t0=$(awk '{print $1}' /proc/uptime)
		$I aeron sub --dir $subdir --channel "$c" -n "$N" >/tmp/demo-sub.out 2>&1 &
		sub=$!
		sleep 0.3
		$I aeron pub --dir $pubdir --channel "$c" -n "$N" -l 256 >/tmp/demo-pub.out 2>&1 || { cat /tmp/demo-pub.out; echo "$name: the publisher failed"; return 1; }
		wait $sub || { cat /tmp/demo-sub.out; echo "$name: the subscriber failed"; return 1; }
		t1=$(awk '{print $1}' /proc/uptime)
		cpu1=$(awk '{print $14 + $15}' /proc/$subdrv/stat)
		echo "   subscriber: $(tail -n 1 /tmp/demo-sub.out)"
		$I aeron pong --dir $subdir --channel "$pc" --pong-channel "$qc" >/tmp/demo-pong.out 2>&1 &
		pong=$!
		sleep 0.3
		$I aeron ping --dir $pubdir --channel "$pc" --pong-channel "$qc" -n "$PINGS" --warmup $((PINGS / 4)) -l 256 >/tmp/demo-ping.out 2>&1 || { cat /tmp/demo-ping.out; echo "$name: ping failed"; return 1; }
		kill -INT $pong 2>/dev/null
		wait $pong 2>/dev/null
		rtt=$(grep 'p99.9=' /tmp/demo-ping.out | tail -n 1)
		echo "   round trips: $rtt"
		# the ticks are 10 ms (USER_HZ 100)
		awk -v n="$name" -v N="$N" -v t0="$t0" -v t1="$t1" -v c0="$cpu0" -v c1="$cpu1" -v rtt="$rtt" 'BEGIN {
			split(rtt, f, " "); p50 = f[3]; p99 = f[5]; sub(/p50=/, "", p50); sub(/p99=/, "", p99)
			d = t1 - t0; if (d <= 0) d = 0.01
			printf "%-13s %12.0f %14s %14s %20.2f\n", n, N / d, p50, p99, (c1 - c0) * 10000 / N
		}' >>/tmp/demo-table
	done
	echo
	echo "Side by side (one guest, 2 vCPUs under TCG emulation: soft-RoCE is the kernel's own RoCE in"
	echo "software, so this compares ibgo's verbs path and its socket path on the same CPUs, not hardware):"
	printf '%-13s %12s %14s %14s %20s\n' channel "messages/s" "RTT p50" "RTT p99" "receiver µs CPU/msg"
	cat /tmp/demo-table
	say "ibgo aeron stat: the receiving driver's counters (aeron:ib's own statistics among Aeron's)"
	$I aeron stat --dir $subdir | grep -E 'Bytes received|NAKs sent|Errors|aeron:ib: (datagrams|rc connections accepted|UD receive buffers|UD receive ring found empty)' || true
	say "ibgo aeron errors: both drivers' error logs"
	for d in $pubdir $subdir; do
		out=$($I aeron errors --dir $d)
		echo "$d: $(echo "$out" | tail -n 1)"
		case "$out" in *"0 distinct errors observed."*) ;; *) echo "$out"; return 1 ;; esac
	done
	kill -INT $pubdrv $subdrv
	wait $pubdrv $subdrv 2>/dev/null
	echo "Every message arrived once and in order on every channel; both error logs are empty."
}

demo_aeron

say "The RDMA stack under it, on its own. ibgo devices (ibv_devices + ibdev2netdev in one table)"
ibgo devices

say "ibgo devinfo -v"
ibgo devinfo -v | tee /tmp/devinfo.go

say "the same device through Debian's ibv_devinfo -v (rdma-core, C)"
ibv_devinfo -v > /tmp/devinfo.c
if diff -u /tmp/devinfo.c /tmp/devinfo.go; then
	echo "ibgo devinfo -v and ibv_devinfo -v agree on all $(wc -l < /tmp/devinfo.c) lines"
else
	echo "ibgo devinfo -v differs from ibv_devinfo -v (diff above)"
	exit 1
fi

# perftest: ibgo's ib_* against Debian's, on the same rxe device, both ways.
# Binaries run from /tmp (the 9p share is slow to exec from under TCG).
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
common="-d rxe0 -x $gidx"

say "ib_write_bw: ibgo server (ibgo perf write_bw), Debian C client"
/tmp/ibgo perf write_bw $common -p 18515 -s 65536 -n 2000 > /tmp/wbw.srv 2>&1 &
srv=$!
waitport 18515
ib_write_bw $common -p 18515 -s 65536 -n 2000 "$ip"
wait $srv || { cat /tmp/wbw.srv; echo "ibgo write_bw server failed"; exit 1; }
echo "---- the ibgo server's output:"
cat /tmp/wbw.srv

say "ib_send_lat: Debian C server, ibgo client (invoked as ib_send_lat)"
ln -sf /tmp/ibgo /tmp/ib_send_lat
ib_send_lat $common -p 18516 -n 1000 > /tmp/slat.srv 2>&1 &
srv=$!
waitport 18516
/tmp/ib_send_lat $common -p 18516 -n 1000 "$ip"
wait $srv || { cat /tmp/slat.srv; echo "C send_lat server failed"; exit 1; }
echo "ibgo and Debian's perftest agree on the wire; both exited 0"
