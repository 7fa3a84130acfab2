// Package rxe is the soft-RoCE (rdma_rxe) provider: it registers itself with
// uverbs for kernel driver id RDMA_DRIVER_RXE (14). rxe needs no driver data to
// open a context; its datapath (mmapped rings and the POST_SEND doorbell) is
// added by the datapath work.
package rxe
