// Package abi holds the Linux RDMA user-space ABI: the structs and numbers of
// <rdma/ib_user_verbs.h>, <rdma/ib_user_ioctl_cmds.h>, <rdma/ib_user_ioctl_verbs.h>,
// <rdma/rdma_user_ioctl_cmds.h>, <rdma/rdma_user_rxe.h>, <rdma/mlx5-abi.h>,
// <rdma/rdma_user_cm.h> and <rdma/rdma_netlink.h>.
//
// The structs are written by hand. Each carries the C name and header it mirrors
// in a comment and in its Go field tags (`c:"field"`), has a compile-time size
// assertion, and is checked field by field against the C headers by
// TestLayoutsMatchCHeaders (gcc over linux-libc-dev) and, in the VM tier, against
// the running kernel's BTF (TestLayoutsMatchKernelBTF). Constants keep their C
// spelling so they can be grepped against the headers, and are checked the same
// way.
//
// All uapi structs are host-endian (little-endian on amd64 and arm64) except the
// fields the headers mark __be (GUIDs, GIDs), which are kept as byte arrays.
package abi
