// Package rxe is the soft-RoCE (rdma_rxe) provider: it registers itself with
// uverbs for kernel driver id RDMA_DRIVER_RXE (14). rxe needs no driver data to
// open a context; its datapath works on the queues the kernel maps (struct
// rxe_queue_buf) and rings the send queue's doorbell with a POST_SEND write
// of zero work requests, as rdma-core's providers/rxe does.
//
// Concurrency: PostSend, PostRecv and Poll may be called from any number of
// goroutines; each queue has one lock (rdma-core's spinlock), held across
// the doorbell for sends. Destroy waits for posts in flight. A CQ resize
// holds the CQ's lock across RESIZE_CQ and an SRQ resize holds the SRQ's
// across MODIFY_SRQ, so Poll and PostRecv wait for them.
package rxe
