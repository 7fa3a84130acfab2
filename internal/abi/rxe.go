package abi

import (
	"structs"
	"unsafe"
)

// rdma/rdma_user_rxe.h: the soft-RoCE provider's shared rings and WQE layouts.

// MmInfo mirrors C: struct mminfo (rdma/rdma_user_rxe.h): where to mmap a
// queue on the uverbs fd.
type MmInfo struct {
	_      structs.HostLayout
	Offset uint64 `c:"offset"`
	Size   uint32 `c:"size"`
	Pad    uint32 `c:"pad"`
}

// RxeCreateCQResp mirrors C: struct rxe_create_cq_resp (rdma/rdma_user_rxe.h).
type RxeCreateCQResp struct {
	_  structs.HostLayout
	MI MmInfo `c:"mi"`
}

// RxeResizeCQResp mirrors C: struct rxe_resize_cq_resp (rdma/rdma_user_rxe.h).
type RxeResizeCQResp struct {
	_  structs.HostLayout
	MI MmInfo `c:"mi"`
}

// RxeCreateQPResp mirrors C: struct rxe_create_qp_resp (rdma/rdma_user_rxe.h).
type RxeCreateQPResp struct {
	_    structs.HostLayout
	RQMI MmInfo `c:"rq_mi"`
	SQMI MmInfo `c:"sq_mi"`
}

// RxeCreateSRQResp mirrors C: struct rxe_create_srq_resp (rdma/rdma_user_rxe.h).
type RxeCreateSRQResp struct {
	_        structs.HostLayout
	MI       MmInfo `c:"mi"`
	SRQNum   uint32 `c:"srq_num"`
	Reserved uint32 `c:"reserved"`
}

// RxeCreateAHResp mirrors C: struct rxe_create_ah_resp (rdma/rdma_user_rxe.h).
type RxeCreateAHResp struct {
	_        structs.HostLayout
	AHNum    uint32 `c:"ah_num"`
	Reserved uint32 `c:"reserved"`
}

// RxeModifySRQCmd mirrors C: struct rxe_modify_srq_cmd (rdma/rdma_user_rxe.h).
type RxeModifySRQCmd struct {
	_            structs.HostLayout
	MmapInfoAddr uint64 `c:"mmap_info_addr"`
}

// RxeQueueBuf mirrors C: struct rxe_queue_buf (rdma/rdma_user_rxe.h), the
// header of every shared ring; elements follow at offset 384. The producer and
// consumer indices sit in separate cache lines.
type RxeQueueBuf struct {
	_             structs.HostLayout
	Log2ElemSize  uint32     `c:"log2_elem_size"`
	IndexMask     uint32     `c:"index_mask"`
	Pad1          [30]uint32 `c:"pad_1"`
	ProducerIndex uint32     `c:"producer_index"`
	Pad2          [31]uint32 `c:"pad_2"`
	ConsumerIndex uint32     `c:"consumer_index"`
	Pad3          [31]uint32 `c:"pad_3"`
}

// RxeSGE mirrors C: struct rxe_sge (rdma/rdma_user_rxe.h).
type RxeSGE struct {
	_      structs.HostLayout
	Addr   uint64 `c:"addr"`
	Length uint32 `c:"length"`
	LKey   uint32 `c:"lkey"`
}

// RxeDMAInfo mirrors C: struct rxe_dma_info (rdma/rdma_user_rxe.h); the SGE
// list (or inline data) follows it.
type RxeDMAInfo struct {
	_         structs.HostLayout
	Length    uint32 `c:"length"`
	Resid     uint32 `c:"resid"`
	CurSGE    uint32 `c:"cur_sge"`
	NumSGE    uint32 `c:"num_sge"`
	SGEOffset uint32 `c:"sge_offset"`
	Reserved  uint32 `c:"reserved"`
}

// RxeSendWR mirrors C: struct rxe_send_wr (rdma/rdma_user_rxe.h) with its
// wr union as bytes; the RxeSendWR* views below name the union members.
type RxeSendWR struct {
	_         structs.HostLayout
	WRID      uint64    `c:"wr_id"`
	Reserved  uint32    `c:"reserved"`
	Opcode    uint32    `c:"opcode"`
	SendFlags uint32    `c:"send_flags"`
	Ex        uint32    `c:"ex"` // imm_data (network order) or invalidate_rkey
	WR        [120]byte `c:"wr"`
}

// RxeSendWRRDMA views C: struct rxe_send_wr through wr.rdma.
type RxeSendWRRDMA struct {
	_          structs.HostLayout
	WRID       uint64 `c:"wr_id"`
	Reserved   uint32 `c:"reserved"`
	Opcode     uint32 `c:"opcode"`
	SendFlags  uint32 `c:"send_flags"`
	Ex         uint32 `c:"ex"`
	RemoteAddr uint64 `c:"wr.rdma.remote_addr"`
	RKey       uint32 `c:"wr.rdma.rkey"`
	_          [108]byte
}

// RxeSendWRAtomic views C: struct rxe_send_wr through wr.atomic.
type RxeSendWRAtomic struct {
	_          structs.HostLayout
	WRID       uint64 `c:"wr_id"`
	Reserved   uint32 `c:"reserved"`
	Opcode     uint32 `c:"opcode"`
	SendFlags  uint32 `c:"send_flags"`
	Ex         uint32 `c:"ex"`
	RemoteAddr uint64 `c:"wr.atomic.remote_addr"`
	CompareAdd uint64 `c:"wr.atomic.compare_add"`
	Swap       uint64 `c:"wr.atomic.swap"`
	RKey       uint32 `c:"wr.atomic.rkey"`
	_          [92]byte
}

// RxeSendWRFlush views C: struct rxe_send_wr through wr.flush (Linux 6.2+
// rdma/rdma_user_rxe.h; not in the 6.1 headers the layout test compiles
// against, so rxe's unit tests pin these offsets instead).
type RxeSendWRFlush struct {
	_          structs.HostLayout
	WRID       uint64 `c:"wr_id"`
	Reserved   uint32 `c:"reserved"`
	Opcode     uint32 `c:"opcode"`
	SendFlags  uint32 `c:"send_flags"`
	Ex         uint32 `c:"ex"`
	RemoteAddr uint64 `c:"wr.flush.remote_addr"`
	Length     uint32 `c:"wr.flush.length"`
	RKey       uint32 `c:"wr.flush.rkey"`
	Type       uint8  `c:"wr.flush.type"`
	Level      uint8  `c:"wr.flush.level"`
	_          [102]byte
}

// RxeSendWRUD views C: struct rxe_send_wr through wr.ud.
type RxeSendWRUD struct {
	_          structs.HostLayout
	WRID       uint64   `c:"wr_id"`
	Reserved   uint32   `c:"reserved"`
	Opcode     uint32   `c:"opcode"`
	SendFlags  uint32   `c:"send_flags"`
	Ex         uint32   `c:"ex"`
	RemoteQPN  uint32   `c:"wr.ud.remote_qpn"`
	RemoteQKey uint32   `c:"wr.ud.remote_qkey"`
	PkeyIndex  uint16   `c:"wr.ud.pkey_index"`
	_          uint16   //
	AHNum      uint32   `c:"wr.ud.ah_num"`
	_          [16]byte // pad[4]
	AV         [88]byte `c:"wr.ud.av"` // struct rxe_av, for kernels without ah_num
}

// RxeSendWRMW views C: struct rxe_send_wr through wr.mw (a memory window
// bind: the window's current rkey, the new rkey, the MR and the range).
type RxeSendWRMW struct {
	_         structs.HostLayout
	WRID      uint64 `c:"wr_id"`
	Reserved  uint32 `c:"reserved"`
	Opcode    uint32 `c:"opcode"`
	SendFlags uint32 `c:"send_flags"`
	Ex        uint32 `c:"ex"`
	Addr      uint64 `c:"wr.mw.addr"`
	Length    uint64 `c:"wr.mw.length"`
	MRLKey    uint32 `c:"wr.mw.mr_lkey"`
	MWRKey    uint32 `c:"wr.mw.mw_rkey"`
	RKey      uint32 `c:"wr.mw.rkey"`
	Access    uint32 `c:"wr.mw.access"`
	_         [88]byte
}

// RxeSendWQE mirrors C: struct rxe_send_wqe (rdma/rdma_user_rxe.h); the SGEs
// or inline data follow Dma.
type RxeSendWQE struct {
	_           structs.HostLayout
	WR          RxeSendWR  `c:"wr"`
	Status      uint32     `c:"status"`
	State       uint32     `c:"state"`
	IOVA        uint64     `c:"iova"`
	Mask        uint32     `c:"mask"`
	FirstPSN    uint32     `c:"first_psn"`
	LastPSN     uint32     `c:"last_psn"`
	AckLength   uint32     `c:"ack_length"`
	SSN         uint32     `c:"ssn"`
	HasRdAtomic uint32     `c:"has_rd_atomic"`
	DMA         RxeDMAInfo `c:"dma"`
}

// RxeRecvWQE mirrors C: struct rxe_recv_wqe (rdma/rdma_user_rxe.h); SGEs follow.
type RxeRecvWQE struct {
	_        structs.HostLayout
	WRID     uint64     `c:"wr_id"`
	Reserved uint32     `c:"reserved"`
	Padding  uint32     `c:"padding"`
	DMA      RxeDMAInfo `c:"dma"`
}

var (
	_ [16]byte  = [unsafe.Sizeof(MmInfo{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(RxeCreateCQResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(RxeResizeCQResp{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(RxeCreateQPResp{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(RxeCreateSRQResp{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(RxeCreateAHResp{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(RxeModifySRQCmd{})]byte{}
	_ [384]byte = [unsafe.Sizeof(RxeQueueBuf{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(RxeSGE{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(RxeDMAInfo{})]byte{}
	_ [144]byte = [unsafe.Sizeof(RxeSendWR{})]byte{}
	_ [144]byte = [unsafe.Sizeof(RxeSendWRRDMA{})]byte{}
	_ [144]byte = [unsafe.Sizeof(RxeSendWRAtomic{})]byte{}
	_ [144]byte = [unsafe.Sizeof(RxeSendWRUD{})]byte{}
	_ [144]byte = [unsafe.Sizeof(RxeSendWRMW{})]byte{}
	_ [144]byte = [unsafe.Sizeof(RxeSendWRFlush{})]byte{}
	_ [208]byte = [unsafe.Sizeof(RxeSendWQE{})]byte{}
	_ [40]byte  = [unsafe.Sizeof(RxeRecvWQE{})]byte{}
)
