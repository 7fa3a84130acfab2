package abi

import (
	"structs"
	"unsafe"
)

// rdma/mlx5-abi.h
const (
	MLX5_IB_ALLOC_UCTX_DEVX = 1 << 0
	MLX5_LIB_CAP_4K_UAR     = 1 << 0
	MLX5_LIB_CAP_DYN_UAR    = 1 << 1
)

// Mlx5AllocUcontextReqV2 mirrors C: struct mlx5_ib_alloc_ucontext_req_v2 (rdma/mlx5-abi.h).
type Mlx5AllocUcontextReqV2 struct {
	_                   structs.HostLayout
	TotalNumBfregs      uint32 `c:"total_num_bfregs"`
	NumLowLatencyBfregs uint32 `c:"num_low_latency_bfregs"`
	Flags               uint32 `c:"flags"`
	CompMask            uint32 `c:"comp_mask"`
	MaxCQEVersion       uint8  `c:"max_cqe_version"`
	Reserved0           uint8  `c:"reserved0"`
	Reserved1           uint16 `c:"reserved1"`
	Reserved2           uint32 `c:"reserved2"`
	LibCaps             uint64 `c:"lib_caps"`
}

// Mlx5AllocUcontextResp mirrors C: struct mlx5_ib_alloc_ucontext_resp (rdma/mlx5-abi.h).
type Mlx5AllocUcontextResp struct {
	_                  structs.HostLayout
	QPTabSize          uint32 `c:"qp_tab_size"`
	BfRegSize          uint32 `c:"bf_reg_size"`
	TotBfregs          uint32 `c:"tot_bfregs"`
	CacheLineSize      uint32 `c:"cache_line_size"`
	MaxSQDescSz        uint16 `c:"max_sq_desc_sz"`
	MaxRQDescSz        uint16 `c:"max_rq_desc_sz"`
	MaxSendWQEBB       uint32 `c:"max_send_wqebb"`
	MaxRecvWR          uint32 `c:"max_recv_wr"`
	MaxSRQRecvWR       uint32 `c:"max_srq_recv_wr"`
	NumPorts           uint16 `c:"num_ports"`
	FlowActionFlags    uint16 `c:"flow_action_flags"`
	CompMask           uint32 `c:"comp_mask"`
	ResponseLength     uint32 `c:"response_length"`
	CQEVersion         uint8  `c:"cqe_version"`
	CmdsSuppUHW        uint8  `c:"cmds_supp_uhw"`
	EthMinInline       uint8  `c:"eth_min_inline"`
	ClockInfoVersions  uint8  `c:"clock_info_versions"`
	HCACoreClockOffset uint64 `c:"hca_core_clock_offset"`
	LogUARSize         uint32 `c:"log_uar_size"`
	NumUARsPerPage     uint32 `c:"num_uars_per_page"`
	NumDynBfregs       uint32 `c:"num_dyn_bfregs"`
	DumpFillMkey       uint32 `c:"dump_fill_mkey"`
}

var (
	_ [32]byte = [unsafe.Sizeof(Mlx5AllocUcontextReqV2{})]byte{}
	_ [72]byte = [unsafe.Sizeof(Mlx5AllocUcontextResp{})]byte{}
)

// Mlx5CreateCQ mirrors C: struct mlx5_ib_create_cq (rdma/mlx5-abi.h).
type Mlx5CreateCQ struct {
	_                structs.HostLayout
	BufAddr          uint64 `c:"buf_addr"`
	DBAddr           uint64 `c:"db_addr"`
	CQESize          uint32 `c:"cqe_size"`
	CQECompEn        uint8  `c:"cqe_comp_en"`
	CQECompResFormat uint8  `c:"cqe_comp_res_format"`
	Flags            uint16 `c:"flags"`
	UARPageIndex     uint16 `c:"uar_page_index"`
	Reserved0        uint16 `c:"reserved0"`
	Reserved1        uint32 `c:"reserved1"`
}

// Mlx5CreateCQResp mirrors C: struct mlx5_ib_create_cq_resp.
type Mlx5CreateCQResp struct {
	_        structs.HostLayout
	CQN      uint32 `c:"cqn"`
	Reserved uint32 `c:"reserved"`
}

// Mlx5ResizeCQ mirrors C: struct mlx5_ib_resize_cq.
type Mlx5ResizeCQ struct {
	_         structs.HostLayout
	BufAddr   uint64 `c:"buf_addr"`
	CQESize   uint16 `c:"cqe_size"`
	Reserved0 uint16 `c:"reserved0"`
	Reserved1 uint32 `c:"reserved1"`
}

// Mlx5CreateSRQ mirrors C: struct mlx5_ib_create_srq.
type Mlx5CreateSRQ struct {
	_         structs.HostLayout
	BufAddr   uint64 `c:"buf_addr"`
	DBAddr    uint64 `c:"db_addr"`
	Flags     uint32 `c:"flags"`
	Reserved0 uint32 `c:"reserved0"`
	UIDX      uint32 `c:"uidx"`
	Reserved1 uint32 `c:"reserved1"`
}

// Mlx5CreateSRQResp mirrors C: struct mlx5_ib_create_srq_resp.
type Mlx5CreateSRQResp struct {
	_        structs.HostLayout
	SRQN     uint32 `c:"srqn"`
	Reserved uint32 `c:"reserved"`
}

// Mlx5CreateQP mirrors C: struct mlx5_ib_create_qp.
type Mlx5CreateQP struct {
	_          structs.HostLayout
	BufAddr    uint64 `c:"buf_addr"`
	DBAddr     uint64 `c:"db_addr"`
	SQWQECount uint32 `c:"sq_wqe_count"`
	RQWQECount uint32 `c:"rq_wqe_count"`
	RQWQEShift uint32 `c:"rq_wqe_shift"`
	Flags      uint32 `c:"flags"`
	UIDX       uint32 `c:"uidx"`
	BfregIndex uint32 `c:"bfreg_index"`
	SQBufAddr  uint64 `c:"sq_buf_addr"`
	ECEOptions uint32 `c:"ece_options"`
	DCIStreams uint16 `c:"dci_streams"`
	Reserved   uint16 `c:"reserved"`
}

// Mlx5CreateQPResp mirrors C: struct mlx5_ib_create_qp_resp.
type Mlx5CreateQPResp struct {
	_          structs.HostLayout
	BfregIndex uint32 `c:"bfreg_index"`
	ECEOptions uint32 `c:"ece_options"`
	CompMask   uint32 `c:"comp_mask"`
	TIRN       uint32 `c:"tirn"`
	TISN       uint32 `c:"tisn"`
	RQN        uint32 `c:"rqn"`
	SQN        uint32 `c:"sqn"`
	Reserved1  uint32 `c:"reserved1"`
	TIRICMAddr uint64 `c:"tir_icm_addr"`
}

// Mlx5CreateAHResp mirrors C: struct mlx5_ib_create_ah_resp.
type Mlx5CreateAHResp struct {
	_              structs.HostLayout
	ResponseLength uint32   `c:"response_length"`
	DMAC           [6]uint8 `c:"dmac"`
	Reserved       [6]uint8 `c:"reserved"`
}

// Mlx5ClockInfo mirrors C: struct mlx5_ib_clock_info (rdma/mlx5-abi.h), the
// read-only page mmapped with MLX5_IB_MMAP_CLOCK_INFO.
type Mlx5ClockInfo struct {
	_        structs.HostLayout
	Sign     uint32 `c:"sign"`
	Resv     uint32 `c:"resv"`
	NSec     uint64 `c:"nsec"`
	Cycles   uint64 `c:"cycles"`
	Frac     uint64 `c:"frac"`
	Mult     uint32 `c:"mult"`
	Shift    uint32 `c:"shift"`
	Mask     uint64 `c:"mask"`
	Overflow uint64 `c:"overflow_period"`
}

var (
	_ [32]byte = [unsafe.Sizeof(Mlx5CreateCQ{})]byte{}
	_ [8]byte  = [unsafe.Sizeof(Mlx5CreateCQResp{})]byte{}
	_ [16]byte = [unsafe.Sizeof(Mlx5ResizeCQ{})]byte{}
	_ [32]byte = [unsafe.Sizeof(Mlx5CreateSRQ{})]byte{}
	_ [8]byte  = [unsafe.Sizeof(Mlx5CreateSRQResp{})]byte{}
	_ [56]byte = [unsafe.Sizeof(Mlx5CreateQP{})]byte{}
	_ [40]byte = [unsafe.Sizeof(Mlx5CreateQPResp{})]byte{}
	_ [16]byte = [unsafe.Sizeof(Mlx5CreateAHResp{})]byte{}
	_ [56]byte = [unsafe.Sizeof(Mlx5ClockInfo{})]byte{}
)
