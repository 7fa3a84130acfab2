// Package mlx5 is the NVIDIA ConnectX (mlx5_ib) provider: it registers itself
// with uverbs for kernel driver id RDMA_DRIVER_MLX5 (1) and runs the direct
// datapath the way rdma-core's libmlx5 (providers/mlx5) does, without cgo:
//
//   - context: the alloc_ucontext request libmlx5 sends (16 bfregs, 4 low
//     latency, CQE version 1, 4K UARs and dynamic UARs), static UAR pages
//     mapped by index or, on kernels that honour dynamic UARs, UAR objects
//     (MLX5_IB_OBJECT_UAR), a bfreg of its own per QP up to
//     MaxDedicatedUARs, then shared bfregs under a lock (static medium
//     bfregs are locked as libmlx5's need_uuar_lock says); doorbell records
//     one per cache line in page-aligned anonymous pages, recycled when
//     their object is destroyed; the clock-info page for timestamps.
//   - CQ, QP (RC, UC, UD) and SRQ creation with libmlx5's driver data and
//     buffer geometry (RQ first, SQ after it, power-of-two rings, the send
//     WQE size and max_inline_data libmlx5 computes, scatter-to-CQE on).
//   - post: WQEs in 64-byte basic blocks (ctrl, remote address, atomic,
//     datagram, data and inline segments), the doorbell record, then an
//     8-byte doorbell or a BlueFlame copy with alternating register halves,
//     with the barriers of rdma-core's udma_barrier.h (internal/mmio).
//   - poll: CQE64 ownership, opcodes, error syndromes, QP lookup by user
//     index, wqe_counter to wr_id, data scattered into the CQE; arm through
//     the UAR's CQ doorbell; compressed CQEs are refused (never requested).
//
// Golden tests replay the bytes real libmlx5 44 wrote over an emulated
// kernel (testdata/vectors, or $IBGO_MLX5_VECTORS), and a test-only
// device model executes WQEs between QPs and writes CQEs.
//
// CQ resize is done: the new ring is allocated, the kernel told, and the
// CQEs not yet polled are copied over as libmlx5 does (TestFakeKernelResizeCQ).
//
// Not done: SRQ resize (ErrNotSupported), memory windows
// (uverbs.PD.AllocMW refuses them with ErrNotSupported: the provider does
// not implement uverbs.MWProvider),
// 128-byte CQEs, CQE compression, DEVX. uverbs.Open calls Context.Opened
// (uverbs.ContextOpener) after GET_CONTEXT to map the UARs and clock page.
package mlx5
