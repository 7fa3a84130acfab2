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
