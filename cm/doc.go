// Package cm is the RDMA connection manager over /dev/infiniband/rdma_cm (the
// kernel's ucma write() ABI): address and route resolution, connect/accept,
// UD service id resolution and multicast. Not yet implemented.
package cm
