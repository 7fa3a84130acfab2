#!/bin/sh
# make test-image-vm: runs inside the soft-RoCE guest (busybox sh). The amd64
# image's root file system, unpacked by umoci on the host, is in /out/rootfs.
# Its ib_write_bw (a link to its ibgo) must interoperate with Debian's C
# perftest in both roles. Exits non-zero on any disagreement.
set -e
. /ibgo/lib.sh
say() { printf '\n==== %s\n' "$*"; }

# Run from /tmp: exec over 9p is slow under TCG.
mkdir -p /tmp/img
cp -a /out/rootfs/usr /tmp/img/
bin=/tmp/img/usr/bin
[ -L $bin/ib_write_bw ] || { echo "the image's ib_write_bw is not a link"; exit 1; }
[ "$(readlink $bin/ib_write_bw)" = ibgo ] || { echo "the image's ib_write_bw does not point at ibgo"; exit 1; }

say "the image's ibgo"
v=$($bin/ibgo version --short)
$bin/ibgo version
[ "$v" = "${IBGO_IMAGE_VERSION:?}" ] || { echo "the image's ibgo says $v, the build embedded $IBGO_IMAGE_VERSION"; exit 1; }
$bin/ibgo devices --netdev dummy0

ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip" "$bin/ibgo")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
common="-x $gidx -s 65536 -n 2000"

say "server: the image's ib_write_bw (device by netdev); client: Debian's ib_write_bw"
dev=$($bin/ibgo devices --netdev dummy0 -q | cut -d' ' -f1)
$bin/ib_write_bw -d "$dev" $common -p 18515 > /tmp/srv.out 2>&1 &
srv=$!
waitport 18515
ib_write_bw -d rxe0 $common -p 18515 "$ip"
wait $srv || { cat /tmp/srv.out; echo "the image's ib_write_bw server failed"; exit 1; }
cat /tmp/srv.out

say "server: Debian's ib_write_bw; client: the image's ib_write_bw (started first, it retries)"
( sleep 1; exec ib_write_bw -d rxe0 $common -p 18516 ) > /tmp/csrv.out 2>&1 &
srv=$!
$bin/ib_write_bw -d rxe0 $common -p 18516 --connect_timeout=60 "$ip"
wait $srv || { cat /tmp/csrv.out; echo "Debian's ib_write_bw server failed"; exit 1; }
echo "the image's ib_write_bw and Debian's perftest agree in both roles"
