#!/bin/sh
# `make demo`: runs inside the soft-RoCE guest (busybox sh), with ibgo and
# Debian's rdma-core tools on PATH. Exits non-zero if anything disagrees.
set -e
. /ibgo/lib.sh
say() { printf '\n==== %s\n' "$*"; }

say "ibgo devices (ibv_devices + ibdev2netdev in one table)"
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
cp "$(command -v ibgo)" /tmp/ibgo
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
