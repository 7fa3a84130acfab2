package uverbs

import "runtime"

// DataInOrderFlags select what QP.QueryDataInOrder answers (enum
// ibv_query_qp_data_in_order_flags).
type DataInOrderFlags uint32

const (
	// DataInOrderReturnCaps asks for the capability bits instead of 0/1.
	DataInOrderReturnCaps DataInOrderFlags = 1 << 0
	// DataInOrderDeviceOnly asks about the device alone, also on CPUs
	// (other than x86) whose memory ordering rdma-core does not vouch for.
	DataInOrderDeviceOnly DataInOrderFlags = 1 << 1
)

// DataInOrderCaps say how a QP's received data lands in memory (enum
// ibv_query_qp_data_in_order_caps).
type DataInOrderCaps uint32

const (
	// DataInOrderWholeMsg: all of a message is written in order, so the
	// last byte arriving means the rest has.
	DataInOrderWholeMsg DataInOrderCaps = 1 << 0
	// DataInOrderAligned128: in-order within each 128-byte aligned block.
	DataInOrderAligned128 DataInOrderCaps = 1 << 1
)

// DataInOrderQuerier is implemented by a QPDriver that knows whether its
// device writes received data in order (rdma-core's query_qp_data_in_order
// provider op). Providers without it answer 0, as rdma-core's default op
// does (rxe has none).
type DataInOrderQuerier interface {
	DataInOrder(op WROpcode, flags DataInOrderFlags) DataInOrderCaps
}

// QueryDataInOrder reports whether data of operation op arriving on the QP
// is written to memory in order (rdma-core ibv_query_qp_data_in_order):
// without DataInOrderReturnCaps 1 (the whole message in order) or 0; with it,
// the DataInOrderCaps bits. Unknown flags, and CPUs other than x86 without
// DataInOrderDeviceOnly, answer 0, as rdma-core does. Safe for concurrent
// use; makes no system call.
func (qp *QP) QueryDataInOrder(op WROpcode, flags DataInOrderFlags) DataInOrderCaps {
	if qp.check() != nil {
		return 0
	}
	q, _ := qp.drv.(DataInOrderQuerier)
	return dataInOrder(runtime.GOARCH, q, op, flags)
}

// dataInOrder mirrors rdma-core libibverbs/verbs.c: ibv_query_qp_data_in_order.
func dataInOrder(arch string, q DataInOrderQuerier, op WROpcode, flags DataInOrderFlags) DataInOrderCaps {
	if flags&^(DataInOrderReturnCaps|DataInOrderDeviceOnly) != 0 {
		return 0
	}
	if arch != "amd64" && arch != "386" && flags&DataInOrderDeviceOnly == 0 {
		return 0
	}
	var r DataInOrderCaps
	if q != nil {
		r = q.DataInOrder(op, flags)
	}
	if r&DataInOrderWholeMsg != 0 {
		r |= DataInOrderAligned128
	}
	if flags&DataInOrderReturnCaps != 0 {
		return r
	}
	if r&DataInOrderWholeMsg != 0 {
		return 1
	}
	return 0
}
