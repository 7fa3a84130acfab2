package mlx5

import (
	"math/bits"
	"syscall"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

func roundUpPow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

func ilog2(n uint32) uint { return uint(bits.Len32(n) - 1) }

func align(n, a uint32) uint32 { return (n + a - 1) / a * a }

// qpLayout is a QP buffer's geometry and the capabilities reported back.
type qpLayout struct {
	sqWQECnt, rqWQECnt uint32
	rqShift            uint
	sqOffset           uint32 // the SQ follows the RQ
	bufSize            uint32
	wqeSize            uint32 // SQ WQE size in bytes (a multiple of 64)
	sqSize             uint32 // bytes; 0 without send WRs
	cap                uverbs.QPCap
}

// sqOverhead mirrors rdma-core providers/mlx5/verbs.c: sq_overhead for the
// default operation set of ibv_create_qp: RC and UC reserve room for a UMR
// WQE (BIND_MW, LOCAL_INV: ctrl 16 + umr ctrl 48 + mkey 64 + 64), UD for the
// datagram segment.
func sqOverhead(t uverbs.QPType) uint32 {
	switch t {
	case uverbs.QPTypeUD:
		return ctrlSegSize + datagramSegSize
	default:
		return ctrlSegSize + 48 + 64 + 64
	}
}

// calcQP mirrors rdma-core verbs.c: mlx5_calc_send_wqe, mlx5_calc_sq_size,
// mlx5_calc_rcv_wqe, mlx5_calc_rq_size and mlx5_calc_wq_size.
func calcQP(t uverbs.QPType, c uverbs.QPCap, hasSRQ bool, r *abi.Mlx5AllocUcontextResp) (qpLayout, error) {
	var l qpLayout
	switch t {
	case uverbs.QPTypeRC, uverbs.QPTypeUC, uverbs.QPTypeUD:
	default:
		return l, postErr("create qp", syscall.EOPNOTSUPP, "QP type %s", t)
	}
	if c.MaxSendWR > 0 {
		// mlx5_calc_sq_size; without send WRs libmlx5 builds no SQ at all
		// (wqe_cnt, max_post and max_gs 0).
		ovh := sqOverhead(t)
		size := ovh + c.MaxSendSGE*dataSegSize
		inl := uint32(0)
		if c.MaxInlineData != 0 {
			inl = ovh + align(4+c.MaxInlineData, 16)
		}
		wqeSize := align(max(size, inl), sendWQEBB)
		if wqeSize > uint32(r.MaxSQDescSz) {
			return l, postErr("create qp", syscall.EINVAL, "a %d-byte send WQE exceeds the device's %d", wqeSize, r.MaxSQDescSz)
		}
		if c.MaxSendWR > r.MaxSendWQEBB {
			return l, postErr("create qp", syscall.EINVAL, "max_send_wr %d exceeds the device's %d", c.MaxSendWR, r.MaxSendWQEBB)
		}
		sqSize := roundUpPow2(c.MaxSendWR * wqeSize)
		l.sqWQECnt = sqSize / sendWQEBB
		if l.sqWQECnt > r.MaxSendWQEBB {
			return l, postErr("create qp", syscall.EINVAL, "%d send WQEBBs exceed the device's %d", l.sqWQECnt, r.MaxSendWQEBB)
		}
		l.wqeSize = wqeSize
		l.sqSize = sqSize
		l.cap.MaxSendWR = sqSize / wqeSize
		l.cap.MaxSendSGE = c.MaxSendSGE
		l.cap.MaxInlineData = wqeSize - ovh - 4
	}

	var rqSize uint32
	if !hasSRQ && c.MaxRecvWR > 0 {
		if c.MaxRecvWR > r.MaxRecvWR {
			return l, postErr("create qp", syscall.EINVAL, "max_recv_wr %d exceeds the device's %d", c.MaxRecvWR, r.MaxRecvWR)
		}
		rw := roundUpPow2(dataSegSize * max(c.MaxRecvSGE, 1))
		if rw > uint32(r.MaxRQDescSz) {
			return l, postErr("create qp", syscall.EINVAL, "a %d-byte receive WQE exceeds the device's %d", rw, r.MaxRQDescSz)
		}
		rqSize = max(roundUpPow2(c.MaxRecvWR)*rw, sendWQEBB)
		l.rqWQECnt = rqSize / rw
		l.rqShift = ilog2(rw)
		l.cap.MaxRecvWR = 1 << ilog2(rqSize/rw)
		l.cap.MaxRecvSGE = rw / dataSegSize
	}
	l.sqOffset = rqSize
	l.bufSize = rqSize + l.sqSize
	return l, nil
}

// srqLayout mirrors rdma-core verbs.c: mlx5_create_srq and
// mlx5_alloc_srq_buf: max is the WQEs the application gets (max_wr+1
// rounded up), total the WQEs of the buffer, which the kernel is told of:
// twice the request plus one, rounded up, for libmlx5's wait queue when
// the device allows that many, else max alone (issue 30, item 6: ibgo
// always doubled, so a max_wr at half the device's limit or more was
// refused where libmlx5 goes on without the wait queue).
func calcSRQ(maxWR, maxSGE uint32, r *abi.Mlx5AllocUcontextResp) (max, total uint32, maxGS int, shift uint, err error) {
	if maxWR > r.MaxSRQRecvWR {
		return 0, 0, 0, 0, postErr("create srq", syscall.EINVAL, "max_wr %d exceeds the device's %d", maxWR, r.MaxSRQRecvWR)
	}
	max = roundUpPow2(maxWR + 1)
	total = max
	if want := uint64(maxWR)*2 + 1; want <= uint64(r.MaxSRQRecvWR) {
		total = roundUpPow2(uint32(want))
	}
	size := max32(32, srqNextSegSize+maxSGE*dataSegSize)
	size = roundUpPow2(size)
	maxGS = int((size - srqNextSegSize) / dataSegSize)
	return max, total, maxGS, ilog2(size), nil
}

func max32(a, b uint32) uint32 { return max(a, b) }
