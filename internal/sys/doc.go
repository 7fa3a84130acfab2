// Package sys is the kernel boundary of ibgo: the one place (with
// internal/mmio) that makes system calls or maps memory.
//
//   - FD owns a command descriptor (uverbs, rdma_cm, netlink); PollFD puts an
//     event descriptor (completion channel, async events) on the Go runtime
//     poller, with context cancellation and deadlines.
//   - Arena is mmap'd command memory the GC never sees; Buf is arena memory
//     by type, the only thing Write accepts (the response
//     buffers a command points at are []byte: arena memory by contract).
//   - IoctlCmd encodes RDMA_VERBS_IOCTL attributes (sticky errors, checked
//     once by Exec); WriteCommand is the legacy write() layout and the
//     INVOKE_WRITE ioctl that carries it.
//   - Mmap, MmapAnon, MapFile and Munmap are the one mmap wrapper (internal/shm
//     maps Aeron files through MapFile).
//   - MsgBatch moves UDP datagrams in batches, non-blocking recvmmsg and
//     sendmmsg over preallocated arrays (aeron/media/udp).
//   - Errno wraps kernel errors; EINVAL and friends are re-exported so that
//     packages above need neither syscall numbers nor golang.org/x/sys/unix.
//
// Pointers become uintptr only inside the system call expression. Linux-only
// parts (netlink, MAP_HUGETLB, MADV_DONTFORK, RLIMIT_MEMLOCK) fail with
// ErrNotSupportedOnOS elsewhere, so the packages above compile on macOS.
package sys
