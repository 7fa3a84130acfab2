package abi

import (
	"structs"
	"unsafe"
)

// RegMR mirrors C: struct ib_uverbs_reg_mr (rdma/ib_user_verbs.h).
type RegMR struct {
	_           structs.HostLayout
	Response    uint64 `c:"response"`
	Start       uint64 `c:"start"`
	Length      uint64 `c:"length"`
	HCAVA       uint64 `c:"hca_va"`
	PDHandle    uint32 `c:"pd_handle"`
	AccessFlags uint32 `c:"access_flags"`
}

// RegMRResp mirrors C: struct ib_uverbs_reg_mr_resp (rdma/ib_user_verbs.h).
type RegMRResp struct {
	_        structs.HostLayout
	MRHandle uint32 `c:"mr_handle"`
	LKey     uint32 `c:"lkey"`
	RKey     uint32 `c:"rkey"`
}

// ReregMR mirrors C: struct ib_uverbs_rereg_mr (rdma/ib_user_verbs.h).
type ReregMR struct {
	_           structs.HostLayout
	Response    uint64 `c:"response"`
	MRHandle    uint32 `c:"mr_handle"`
	Flags       uint32 `c:"flags"`
	Start       uint64 `c:"start"`
	Length      uint64 `c:"length"`
	HCAVA       uint64 `c:"hca_va"`
	PDHandle    uint32 `c:"pd_handle"`
	AccessFlags uint32 `c:"access_flags"`
}

// ReregMRResp mirrors C: struct ib_uverbs_rereg_mr_resp (rdma/ib_user_verbs.h).
type ReregMRResp struct {
	_    structs.HostLayout
	LKey uint32 `c:"lkey"`
	RKey uint32 `c:"rkey"`
}

// DeregMR mirrors C: struct ib_uverbs_dereg_mr (rdma/ib_user_verbs.h).
type DeregMR struct {
	_        structs.HostLayout
	MRHandle uint32 `c:"mr_handle"`
}

// CreateCompChannel mirrors C: struct ib_uverbs_create_comp_channel (rdma/ib_user_verbs.h).
type CreateCompChannel struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
}

// CreateCompChannelResp mirrors C: struct ib_uverbs_create_comp_channel_resp (rdma/ib_user_verbs.h).
type CreateCompChannelResp struct {
	_  structs.HostLayout
	FD uint32 `c:"fd"`
}

// CreateCQ mirrors C: struct ib_uverbs_create_cq (rdma/ib_user_verbs.h).
type CreateCQ struct {
	_           structs.HostLayout
	Response    uint64 `c:"response"`
	UserHandle  uint64 `c:"user_handle"`
	CQE         uint32 `c:"cqe"`
	CompVector  uint32 `c:"comp_vector"`
	CompChannel int32  `c:"comp_channel"`
	Reserved    uint32 `c:"reserved"`
}

// CreateCQResp mirrors C: struct ib_uverbs_create_cq_resp (rdma/ib_user_verbs.h).
type CreateCQResp struct {
	_        structs.HostLayout
	CQHandle uint32 `c:"cq_handle"`
	CQE      uint32 `c:"cqe"`
}

// ExCreateCQ mirrors C: struct ib_uverbs_ex_create_cq (rdma/ib_user_verbs.h).
type ExCreateCQ struct {
	_           structs.HostLayout
	UserHandle  uint64 `c:"user_handle"`
	CQE         uint32 `c:"cqe"`
	CompVector  uint32 `c:"comp_vector"`
	CompChannel int32  `c:"comp_channel"`
	CompMask    uint32 `c:"comp_mask"`
	Flags       uint32 `c:"flags"`
	Reserved    uint32 `c:"reserved"`
}

// ExCreateCQResp mirrors C: struct ib_uverbs_ex_create_cq_resp (rdma/ib_user_verbs.h).
type ExCreateCQResp struct {
	_              structs.HostLayout
	Base           CreateCQResp `c:"base"`
	CompMask       uint32       `c:"comp_mask"`
	ResponseLength uint32       `c:"response_length"`
}

// enum ib_uverbs_ex_create_cq_flags (rdma/ib_user_verbs.h): the flags of
// EX_CREATE_CQ and of the CQ_CREATE ioctl's UVERBS_ATTR_CREATE_CQ_FLAGS.
const (
	IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION = 1 << 0
	IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN       = 1 << 1
)

// ResizeCQ mirrors C: struct ib_uverbs_resize_cq (rdma/ib_user_verbs.h).
type ResizeCQ struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	CQHandle uint32 `c:"cq_handle"`
	CQE      uint32 `c:"cqe"`
}

// ResizeCQResp mirrors C: struct ib_uverbs_resize_cq_resp (rdma/ib_user_verbs.h).
type ResizeCQResp struct {
	_        structs.HostLayout
	CQE      uint32 `c:"cqe"`
	Reserved uint32 `c:"reserved"`
}

// ReqNotifyCQ mirrors C: struct ib_uverbs_req_notify_cq (rdma/ib_user_verbs.h).
type ReqNotifyCQ struct {
	_             structs.HostLayout
	CQHandle      uint32 `c:"cq_handle"`
	SolicitedOnly uint32 `c:"solicited_only"`
}

// DestroyCQ mirrors C: struct ib_uverbs_destroy_cq (rdma/ib_user_verbs.h).
type DestroyCQ struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	CQHandle uint32 `c:"cq_handle"`
	Reserved uint32 `c:"reserved"`
}

// DestroyCQResp mirrors C: struct ib_uverbs_destroy_cq_resp (rdma/ib_user_verbs.h).
type DestroyCQResp struct {
	_                   structs.HostLayout
	CompEventsReported  uint32 `c:"comp_events_reported"`
	AsyncEventsReported uint32 `c:"async_events_reported"`
}

// WC mirrors C: struct ib_uverbs_wc (rdma/ib_user_verbs.h).
type WC struct {
	_            structs.HostLayout
	WRID         uint64 `c:"wr_id"`
	Status       uint32 `c:"status"`
	Opcode       uint32 `c:"opcode"`
	VendorErr    uint32 `c:"vendor_err"`
	ByteLen      uint32 `c:"byte_len"`
	Ex           uint32 `c:"ex"`
	QPNum        uint32 `c:"qp_num"`
	SrcQP        uint32 `c:"src_qp"`
	WCFlags      uint32 `c:"wc_flags"`
	PkeyIndex    uint16 `c:"pkey_index"`
	SLID         uint16 `c:"slid"`
	SL           uint8  `c:"sl"`
	DLIDPathBits uint8  `c:"dlid_path_bits"`
	PortNum      uint8  `c:"port_num"`
	Reserved     uint8  `c:"reserved"`
}

// GlobalRoute mirrors C: struct ib_uverbs_global_route (rdma/ib_user_verbs.h).
type GlobalRoute struct {
	_            structs.HostLayout
	DGID         [16]byte `c:"dgid"`
	FlowLabel    uint32   `c:"flow_label"`
	SGIDIndex    uint8    `c:"sgid_index"`
	HopLimit     uint8    `c:"hop_limit"`
	TrafficClass uint8    `c:"traffic_class"`
	Reserved     uint8    `c:"reserved"`
}

// AHAttr mirrors C: struct ib_uverbs_ah_attr (rdma/ib_user_verbs.h).
type AHAttr struct {
	_           structs.HostLayout
	GRH         GlobalRoute `c:"grh"`
	DLID        uint16      `c:"dlid"`
	SL          uint8       `c:"sl"`
	SrcPathBits uint8       `c:"src_path_bits"`
	StaticRate  uint8       `c:"static_rate"`
	IsGlobal    uint8       `c:"is_global"`
	PortNum     uint8       `c:"port_num"`
	Reserved    uint8       `c:"reserved"`
}

// QPAttrResp mirrors C: struct ib_uverbs_qp_attr (rdma/ib_user_verbs.h).
type QPAttrResp struct {
	_                structs.HostLayout
	QPAttrMask       uint32  `c:"qp_attr_mask"`
	QPState          uint32  `c:"qp_state"`
	CurQPState       uint32  `c:"cur_qp_state"`
	PathMTU          uint32  `c:"path_mtu"`
	PathMigState     uint32  `c:"path_mig_state"`
	QKey             uint32  `c:"qkey"`
	RQPSN            uint32  `c:"rq_psn"`
	SQPSN            uint32  `c:"sq_psn"`
	DestQPNum        uint32  `c:"dest_qp_num"`
	QPAccessFlags    uint32  `c:"qp_access_flags"`
	AHAttr           AHAttr  `c:"ah_attr"`
	AltAHAttr        AHAttr  `c:"alt_ah_attr"`
	MaxSendWR        uint32  `c:"max_send_wr"`
	MaxRecvWR        uint32  `c:"max_recv_wr"`
	MaxSendSGE       uint32  `c:"max_send_sge"`
	MaxRecvSGE       uint32  `c:"max_recv_sge"`
	MaxInlineData    uint32  `c:"max_inline_data"`
	PkeyIndex        uint16  `c:"pkey_index"`
	AltPkeyIndex     uint16  `c:"alt_pkey_index"`
	EnSQDAsyncNotify uint8   `c:"en_sqd_async_notify"`
	SQDraining       uint8   `c:"sq_draining"`
	MaxRdAtomic      uint8   `c:"max_rd_atomic"`
	MaxDestRdAtomic  uint8   `c:"max_dest_rd_atomic"`
	MinRNRTimer      uint8   `c:"min_rnr_timer"`
	PortNum          uint8   `c:"port_num"`
	Timeout          uint8   `c:"timeout"`
	RetryCnt         uint8   `c:"retry_cnt"`
	RNRRetry         uint8   `c:"rnr_retry"`
	AltPortNum       uint8   `c:"alt_port_num"`
	AltTimeout       uint8   `c:"alt_timeout"`
	Reserved         [5]byte `c:"reserved"`
}

// CreateQP mirrors C: struct ib_uverbs_create_qp (rdma/ib_user_verbs.h).
type CreateQP struct {
	_             structs.HostLayout
	Response      uint64 `c:"response"`
	UserHandle    uint64 `c:"user_handle"`
	PDHandle      uint32 `c:"pd_handle"`
	SendCQHandle  uint32 `c:"send_cq_handle"`
	RecvCQHandle  uint32 `c:"recv_cq_handle"`
	SRQHandle     uint32 `c:"srq_handle"`
	MaxSendWR     uint32 `c:"max_send_wr"`
	MaxRecvWR     uint32 `c:"max_recv_wr"`
	MaxSendSGE    uint32 `c:"max_send_sge"`
	MaxRecvSGE    uint32 `c:"max_recv_sge"`
	MaxInlineData uint32 `c:"max_inline_data"`
	SQSigAll      uint8  `c:"sq_sig_all"`
	QPType        uint8  `c:"qp_type"`
	IsSRQ         uint8  `c:"is_srq"`
	Reserved      uint8  `c:"reserved"`
}

// CreateQPResp mirrors C: struct ib_uverbs_create_qp_resp (rdma/ib_user_verbs.h).
type CreateQPResp struct {
	_             structs.HostLayout
	QPHandle      uint32 `c:"qp_handle"`
	QPN           uint32 `c:"qpn"`
	MaxSendWR     uint32 `c:"max_send_wr"`
	MaxRecvWR     uint32 `c:"max_recv_wr"`
	MaxSendSGE    uint32 `c:"max_send_sge"`
	MaxRecvSGE    uint32 `c:"max_recv_sge"`
	MaxInlineData uint32 `c:"max_inline_data"`
	Reserved      uint32 `c:"reserved"`
}

// QPCap mirrors C: struct ib_uverbs_qp_cap (rdma/ib_user_ioctl_verbs.h).
type QPCap struct {
	_             structs.HostLayout
	MaxSendWR     uint32 `c:"max_send_wr"`
	MaxRecvWR     uint32 `c:"max_recv_wr"`
	MaxSendSGE    uint32 `c:"max_send_sge"`
	MaxRecvSGE    uint32 `c:"max_recv_sge"`
	MaxInlineData uint32 `c:"max_inline_data"`
}

// QPDest mirrors C: struct ib_uverbs_qp_dest (rdma/ib_user_verbs.h).
type QPDest struct {
	_            structs.HostLayout
	DGID         [16]byte `c:"dgid"`
	FlowLabel    uint32   `c:"flow_label"`
	DLID         uint16   `c:"dlid"`
	Reserved     uint16   `c:"reserved"`
	SGIDIndex    uint8    `c:"sgid_index"`
	HopLimit     uint8    `c:"hop_limit"`
	TrafficClass uint8    `c:"traffic_class"`
	SL           uint8    `c:"sl"`
	SrcPathBits  uint8    `c:"src_path_bits"`
	StaticRate   uint8    `c:"static_rate"`
	IsGlobal     uint8    `c:"is_global"`
	PortNum      uint8    `c:"port_num"`
}

// QueryQP mirrors C: struct ib_uverbs_query_qp (rdma/ib_user_verbs.h).
type QueryQP struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	QPHandle uint32 `c:"qp_handle"`
	AttrMask uint32 `c:"attr_mask"`
}

// QueryQPResp mirrors C: struct ib_uverbs_query_qp_resp (rdma/ib_user_verbs.h).
type QueryQPResp struct {
	_               structs.HostLayout
	Dest            QPDest  `c:"dest"`
	AltDest         QPDest  `c:"alt_dest"`
	MaxSendWR       uint32  `c:"max_send_wr"`
	MaxRecvWR       uint32  `c:"max_recv_wr"`
	MaxSendSGE      uint32  `c:"max_send_sge"`
	MaxRecvSGE      uint32  `c:"max_recv_sge"`
	MaxInlineData   uint32  `c:"max_inline_data"`
	QKey            uint32  `c:"qkey"`
	RQPSN           uint32  `c:"rq_psn"`
	SQPSN           uint32  `c:"sq_psn"`
	DestQPNum       uint32  `c:"dest_qp_num"`
	QPAccessFlags   uint32  `c:"qp_access_flags"`
	PkeyIndex       uint16  `c:"pkey_index"`
	AltPkeyIndex    uint16  `c:"alt_pkey_index"`
	QPState         uint8   `c:"qp_state"`
	CurQPState      uint8   `c:"cur_qp_state"`
	PathMTU         uint8   `c:"path_mtu"`
	PathMigState    uint8   `c:"path_mig_state"`
	SQDraining      uint8   `c:"sq_draining"`
	MaxRdAtomic     uint8   `c:"max_rd_atomic"`
	MaxDestRdAtomic uint8   `c:"max_dest_rd_atomic"`
	MinRNRTimer     uint8   `c:"min_rnr_timer"`
	PortNum         uint8   `c:"port_num"`
	Timeout         uint8   `c:"timeout"`
	RetryCnt        uint8   `c:"retry_cnt"`
	RNRRetry        uint8   `c:"rnr_retry"`
	AltPortNum      uint8   `c:"alt_port_num"`
	AltTimeout      uint8   `c:"alt_timeout"`
	SQSigAll        uint8   `c:"sq_sig_all"`
	Reserved        [5]byte `c:"reserved"`
}

// ModifyQP mirrors C: struct ib_uverbs_modify_qp (rdma/ib_user_verbs.h).
type ModifyQP struct {
	_                structs.HostLayout
	Dest             QPDest  `c:"dest"`
	AltDest          QPDest  `c:"alt_dest"`
	QPHandle         uint32  `c:"qp_handle"`
	AttrMask         uint32  `c:"attr_mask"`
	QKey             uint32  `c:"qkey"`
	RQPSN            uint32  `c:"rq_psn"`
	SQPSN            uint32  `c:"sq_psn"`
	DestQPNum        uint32  `c:"dest_qp_num"`
	QPAccessFlags    uint32  `c:"qp_access_flags"`
	PkeyIndex        uint16  `c:"pkey_index"`
	AltPkeyIndex     uint16  `c:"alt_pkey_index"`
	QPState          uint8   `c:"qp_state"`
	CurQPState       uint8   `c:"cur_qp_state"`
	PathMTU          uint8   `c:"path_mtu"`
	PathMigState     uint8   `c:"path_mig_state"`
	EnSQDAsyncNotify uint8   `c:"en_sqd_async_notify"`
	MaxRdAtomic      uint8   `c:"max_rd_atomic"`
	MaxDestRdAtomic  uint8   `c:"max_dest_rd_atomic"`
	MinRNRTimer      uint8   `c:"min_rnr_timer"`
	PortNum          uint8   `c:"port_num"`
	Timeout          uint8   `c:"timeout"`
	RetryCnt         uint8   `c:"retry_cnt"`
	RNRRetry         uint8   `c:"rnr_retry"`
	AltPortNum       uint8   `c:"alt_port_num"`
	AltTimeout       uint8   `c:"alt_timeout"`
	Reserved         [2]byte `c:"reserved"`
}

// ExModifyQP mirrors C: struct ib_uverbs_ex_modify_qp (rdma/ib_user_verbs.h).
type ExModifyQP struct {
	_         structs.HostLayout
	Base      ModifyQP `c:"base"`
	RateLimit uint32   `c:"rate_limit"`
	Reserved  uint32   `c:"reserved"`
}

// ExModifyQPResp mirrors C: struct ib_uverbs_ex_modify_qp_resp (rdma/ib_user_verbs.h).
type ExModifyQPResp struct {
	_              structs.HostLayout
	CompMask       uint32 `c:"comp_mask"`
	ResponseLength uint32 `c:"response_length"`
}

// DestroyQP mirrors C: struct ib_uverbs_destroy_qp (rdma/ib_user_verbs.h).
type DestroyQP struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	QPHandle uint32 `c:"qp_handle"`
	Reserved uint32 `c:"reserved"`
}

// DestroyQPResp mirrors C: struct ib_uverbs_destroy_qp_resp (rdma/ib_user_verbs.h).
type DestroyQPResp struct {
	_              structs.HostLayout
	EventsReported uint32 `c:"events_reported"`
}

// SGE mirrors C: struct ib_uverbs_sge (rdma/ib_user_verbs.h).
type SGE struct {
	_      structs.HostLayout
	Addr   uint64 `c:"addr"`
	Length uint32 `c:"length"`
	LKey   uint32 `c:"lkey"`
}

// PostSend mirrors C: struct ib_uverbs_post_send (rdma/ib_user_verbs.h).
type PostSend struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	QPHandle uint32 `c:"qp_handle"`
	WRCount  uint32 `c:"wr_count"`
	SGECount uint32 `c:"sge_count"`
	WQESize  uint32 `c:"wqe_size"`
}

// PostSendResp mirrors C: struct ib_uverbs_post_send_resp (rdma/ib_user_verbs.h).
type PostSendResp struct {
	_     structs.HostLayout
	BadWR uint32 `c:"bad_wr"`
}

// CreateAH mirrors C: struct ib_uverbs_create_ah (rdma/ib_user_verbs.h).
type CreateAH struct {
	_          structs.HostLayout
	Response   uint64 `c:"response"`
	UserHandle uint64 `c:"user_handle"`
	PDHandle   uint32 `c:"pd_handle"`
	Reserved   uint32 `c:"reserved"`
	Attr       AHAttr `c:"attr"`
}

// CreateAHResp mirrors C: struct ib_uverbs_create_ah_resp (rdma/ib_user_verbs.h).
type CreateAHResp struct {
	_        structs.HostLayout
	AHHandle uint32 `c:"ah_handle"`
}

// DestroyAH mirrors C: struct ib_uverbs_destroy_ah (rdma/ib_user_verbs.h).
type DestroyAH struct {
	_        structs.HostLayout
	AHHandle uint32 `c:"ah_handle"`
}

// AttachMcast mirrors C: struct ib_uverbs_attach_mcast (rdma/ib_user_verbs.h).
type AttachMcast struct {
	_        structs.HostLayout
	GID      [16]byte `c:"gid"`
	QPHandle uint32   `c:"qp_handle"`
	MLID     uint16   `c:"mlid"`
	Reserved uint16   `c:"reserved"`
}

// CreateSRQ mirrors C: struct ib_uverbs_create_srq (rdma/ib_user_verbs.h).
type CreateSRQ struct {
	_          structs.HostLayout
	Response   uint64 `c:"response"`
	UserHandle uint64 `c:"user_handle"`
	PDHandle   uint32 `c:"pd_handle"`
	MaxWR      uint32 `c:"max_wr"`
	MaxSGE     uint32 `c:"max_sge"`
	SRQLimit   uint32 `c:"srq_limit"`
}

// CreateSRQResp mirrors C: struct ib_uverbs_create_srq_resp (rdma/ib_user_verbs.h).
type CreateSRQResp struct {
	_         structs.HostLayout
	SRQHandle uint32 `c:"srq_handle"`
	MaxWR     uint32 `c:"max_wr"`
	MaxSGE    uint32 `c:"max_sge"`
	SRQN      uint32 `c:"srqn"`
}

// ModifySRQ mirrors C: struct ib_uverbs_modify_srq (rdma/ib_user_verbs.h).
type ModifySRQ struct {
	_         structs.HostLayout
	SRQHandle uint32 `c:"srq_handle"`
	AttrMask  uint32 `c:"attr_mask"`
	MaxWR     uint32 `c:"max_wr"`
	SRQLimit  uint32 `c:"srq_limit"`
}

// QuerySRQ mirrors C: struct ib_uverbs_query_srq (rdma/ib_user_verbs.h).
type QuerySRQ struct {
	_         structs.HostLayout
	Response  uint64 `c:"response"`
	SRQHandle uint32 `c:"srq_handle"`
	Reserved  uint32 `c:"reserved"`
}

// QuerySRQResp mirrors C: struct ib_uverbs_query_srq_resp (rdma/ib_user_verbs.h).
type QuerySRQResp struct {
	_        structs.HostLayout
	MaxWR    uint32 `c:"max_wr"`
	MaxSGE   uint32 `c:"max_sge"`
	SRQLimit uint32 `c:"srq_limit"`
	Reserved uint32 `c:"reserved"`
}

// DestroySRQ mirrors C: struct ib_uverbs_destroy_srq (rdma/ib_user_verbs.h).
type DestroySRQ struct {
	_         structs.HostLayout
	Response  uint64 `c:"response"`
	SRQHandle uint32 `c:"srq_handle"`
	Reserved  uint32 `c:"reserved"`
}

// DestroySRQResp mirrors C: struct ib_uverbs_destroy_srq_resp (rdma/ib_user_verbs.h).
type DestroySRQResp struct {
	_              structs.HostLayout
	EventsReported uint32 `c:"events_reported"`
}

var (
	_ [40]byte  = [unsafe.Sizeof(RegMR{})]byte{}
	_ [12]byte  = [unsafe.Sizeof(RegMRResp{})]byte{}
	_ [48]byte  = [unsafe.Sizeof(ReregMR{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(ReregMRResp{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(DeregMR{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(CreateCompChannel{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(CreateCompChannelResp{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(CreateCQ{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(CreateCQResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(ResizeCQ{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(ResizeCQResp{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(ReqNotifyCQ{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(DestroyCQ{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(DestroyCQResp{})]byte{}
	_ [48]byte  = [unsafe.Sizeof(WC{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(GlobalRoute{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(AHAttr{})]byte{}
	_ [144]byte = [unsafe.Sizeof(QPAttrResp{})]byte{}
	_ [56]byte  = [unsafe.Sizeof(CreateQP{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(CreateQPResp{})]byte{}
	_ [20]byte  = [unsafe.Sizeof(QPCap{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(QPDest{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(QueryQP{})]byte{}
	_ [128]byte = [unsafe.Sizeof(QueryQPResp{})]byte{}
	_ [112]byte = [unsafe.Sizeof(ModifyQP{})]byte{}
	_ [120]byte = [unsafe.Sizeof(ExModifyQP{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(ExModifyQPResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(DestroyQP{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(DestroyQPResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(SGE{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(PostSend{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(PostSendResp{})]byte{}
	_ [56]byte  = [unsafe.Sizeof(CreateAH{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(CreateAHResp{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(DestroyAH{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(AttachMcast{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(CreateSRQ{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(CreateSRQResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(ModifySRQ{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(QuerySRQ{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(QuerySRQResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(DestroySRQ{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(DestroySRQResp{})]byte{}
)
