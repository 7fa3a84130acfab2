package mlx5

import (
	"math/bits"
	"unsafe"
)

// Hardware constants of mlx5dv.h / mlx5.h (rdma-core providers/mlx5).
const (
	sendWQEBB   = 64 // MLX5_SEND_WQE_BB
	sendWQEBBSh = 6

	opNOP          = 0x00 // MLX5_OPCODE_NOP
	opSendInval    = 0x01
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opAtomicCS     = 0x11
	opAtomicFA     = 0x12

	ctrlCQUpdate  = 0x08 // MLX5_WQE_CTRL_CQ_UPDATE
	ctrlSolicited = 0x02 // MLX5_WQE_CTRL_SOLICITED
	ctrlFence     = 0x80 // MLX5_WQE_CTRL_FENCE (MLX5_FENCE_MODE_SMALL_AND_FENCE << 5)

	inlineSegFlag = 0x80000000 // MLX5_INLINE_SEG
	invalidLKey   = 0x100      // MLX5_INVALID_LKEY
	extendedUDAV  = 0x80000000 // MLX5_EXTENDED_UD_AV
	atomicSize    = 8          // MLX5_ATOMIC_SIZE

	ctrlSegSize     = 16
	dataSegSize     = 16
	raddrSegSize    = 16
	atomicSegSize   = 16
	datagramSegSize = 48

	// Doorbell record slots (MLX5_RCV_DBR, MLX5_SND_DBR; MLX5_CQ_SET_CI,
	// MLX5_CQ_ARM_DB).
	rcvDBR   = 0
	sndDBR   = 1
	cqSetCI  = 0
	cqArmDB  = 1
	cqDBOff  = 0x20 // MLX5_CQ_DOORBELL, in the UAR page
	bfOffset = 0x800
)

func be32(v uint32) uint32 { return bits.ReverseBytes32(v) }
func be64(v uint64) uint64 { return bits.ReverseBytes64(v) }
func be16(v uint16) uint16 { return bits.ReverseBytes16(v) }

func put32(p unsafe.Pointer, off uintptr, v uint32) {
	*(*uint32)(unsafe.Add(p, off)) = be32(v)
}

func put64(p unsafe.Pointer, off uintptr, v uint64) {
	*(*uint64)(unsafe.Add(p, off)) = be64(v)
}

func get32(p unsafe.Pointer, off uintptr) uint32 { return be32(*(*uint32)(unsafe.Add(p, off))) }
func get16(p unsafe.Pointer, off uintptr) uint16 { return be16(*(*uint16)(unsafe.Add(p, off))) }

// setDataSeg writes struct mlx5_wqe_data_seg (set_data_ptr_seg).
func setDataSeg(p unsafe.Pointer, length, lkey uint32, addr uint64) {
	put32(p, 0, length)
	put32(p, 4, lkey)
	put64(p, 8, addr)
}

// av is struct mlx5_wqe_av (48 bytes), what an AH holds and a UD WQE's
// datagram segment copies.
type av [datagramSegSize]byte

// AVParams are the inputs of mlx5_create_ah's address vector.
type AVParams struct {
	Ethernet     bool   // the port's link layer is Ethernet (RoCE)
	RoCEv2       bool   // the source GID is RoCE v2 (Ethernet only)
	UDPSrcPort   uint16 // RoCE v2 with flow label 0: the UDP source port (libmlx5 draws it at random in 0xC000..0xFFFF)
	SL           uint8
	StaticRate   uint8 // enum ibv_rate; mapped to the mlx5 rate as libmlx5 does
	SrcPathBits  uint8
	DLID         uint16
	IsGlobal     bool
	SGIDIndex    uint8
	FlowLabel    uint32
	HopLimit     uint8
	TrafficClass uint8
	DGID         [16]byte
	DMAC         [6]byte // RoCE: from the CREATE_AH driver response
}

// buildAV mirrors rdma-core providers/mlx5/verbs.c: mlx5_create_ah.
func buildAV(p AVParams) (a av) {
	b := unsafe.Pointer(&a[0])
	grh := uint32(0)
	rate := mlx5Rate(p.StaticRate)
	if p.Ethernet {
		if p.RoCEv2 {
			sport := p.UDPSrcPort
			if p.IsGlobal && p.FlowLabel != 0 {
				sport = flowLabelToUDPSport(p.FlowLabel)
			}
			*(*uint16)(unsafe.Add(b, 14)) = be16(sport)
		}
		// RoCE packets always carry a GRH, so the bit is reserved.
		a[12] = rate<<4 | (p.SL&7)<<1
	} else {
		a[13] = p.SrcPathBits & 0x7f
		*(*uint16)(unsafe.Add(b, 14)) = be16(p.DLID)
		grh = 1
		a[12] = rate<<4 | p.SL&0xf
	}
	if p.IsGlobal {
		a[26] = p.TrafficClass
		a[27] = p.HopLimit
		put32(b, 28, grh<<30|uint32(p.SGIDIndex)<<20|p.FlowLabel&0xfffff)
		copy(a[32:48], p.DGID[:])
	}
	if p.Ethernet {
		copy(a[20:26], p.DMAC[:])
	}
	return a
}

// flowLabelToUDPSport mirrors libibverbs verbs.h: ibv_flow_label_to_udp_sport.
func flowLabelToUDPSport(fl uint32) uint16 {
	low, high := fl&0x3fff, fl&0xfc000
	low ^= high >> 14
	return uint16(low | 0xc000)
}

// rdma/mlx5-abi.h: enum mlx5_qp_flags, MLX5_QP_FLAG_SCATTER_CQE.
const qpFlagScatterCQE = 1 << 1

// ibToMLX5Rate is rdma-core verbs.c's ib_to_mlx5_rate_table (IB spec 1.3
// table 224, best effort): enum ibv_rate to the AV's stat_rate.
var ibToMLX5Rate = [...]uint8{0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0}

// mlx5Rate mirrors rdma-core verbs.c: ah_attr_to_mlx5_rate.
func mlx5Rate(r uint8) uint8 {
	if int(r) >= len(ibToMLX5Rate) {
		return 0
	}
	return ibToMLX5Rate[r]
}
