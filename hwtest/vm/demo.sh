#!/bin/sh
# `make demo`: runs inside the soft-RoCE guest (busybox sh), with ibgo and
# Debian's rdma-core tools on PATH. Exits non-zero if anything disagrees.
set -e
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
