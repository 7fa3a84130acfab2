// Package uverbs is RDMA verbs without cgo: it speaks the kernel's uverbs ABI
// (the RDMA_VERBS_IOCTL methods and the legacy write() commands) on
// /dev/infiniband/uverbsN directly.
//
// Devices are discovered from sysfs and RDMA netlink; Open gives a Context on
// which PDs, MRs, CQs, QPs, SRQs, AHs and completion channels are created.
// Providers (the rxe and mlx5 packages) register themselves by kernel driver
// id and supply the driver-specific request/response bytes and the datapath;
// this package never imports them. Import the provider for your hardware,
// or github.com/ibgo/ibgo/uverbs/all for every provider:
//
//	import _ "github.com/ibgo/ibgo/rxe"
//
// The datapath is QP.PostSend/PostRecv and CQ.Poll; for programs ported
// from C, QP.Ex (ibv_wr_*) and CQ.StartPoll with the Read* getters
// (ibv_start_poll, ibv_wc_read_*) are the extended forms of the same, built
// on it.
//
// Errors are *Error values wrapping the kernel's errno; errors.Is(err,
// ErrNotSupported) tells whether the kernel or device lacks a feature.
//
// Object lifecycle: every kernel object (PD, MR, MW, CQ, QP, SRQ, AH,
// completion channel) is created by one pipeline (command lock, user handle, ioctl with
// a per-method fallback to the legacy write command, the provider's hook,
// registration) and closed by one path: Close is idempotent; when the kernel
// refuses because other objects still use it, Close returns an error
// wrapping ErrBusy and the object stays usable; Context.Close takes every
// object with it.
//
// Memory windows (PD.AllocMW, QP.BindMW, the WRBindMW, WRLocalInv and
// WRSendWithInv work requests) need a provider that carries them (rxe);
// others refuse them with ErrNotSupported.
//
// A device that goes away under an open Context (removed, or on rxe its link
// deleted) is reported as EventDeviceFatal by GetAsyncEvent; every command
// and post on that Context then fails with ErrDeviceFatal (Close and Poll
// still work), and the program should close it: on rxe the kernel cannot
// finish the removal before it does.
//
// Concurrency: each object type states its contract in its doc comment.
// Types without one (attributes, work requests, GID, WC, ...) are plain
// values: safe to read from several goroutines, not to modify concurrently.
package uverbs
