package mlx5

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/ibgo/ibgo/internal/mmio"
	"github.com/ibgo/ibgo/uverbs"
)

const srqNextSegSize = 16 // struct mlx5_wqe_srq_next_seg

// srqQueue is rdma-core struct mlx5_srq: a free list of WQEs linked through
// each WQE's next_wqe_index.
type srqQueue struct {
	buf   unsafe.Pointer
	wrid  []uint64
	max   uint32 // WQEs, a power of two
	maxGS int
	shift uint
	head  uint32
	tail  uint32
	count uint16 // the doorbell counter: 16 bits, as libmlx5's srq->counter; the record's bits 31:16 are reserved
	dbrec *uint32
	local localFn    // the SRQ's PD's registered memory (scatter-to-CQE)
	mu    sync.Mutex // post and the CQ poll's free both move the free list (libmlx5 srq->lock)
}

func (s *srqQueue) wqe(i uint32) unsafe.Pointer {
	return unsafe.Add(s.buf, uintptr(i&(s.max-1))<<s.shift)
}

// init links every WQE to the next, as rdma-core verbs.c: mlx5_alloc_srq_buf.
func (s *srqQueue) init() {
	for i := uint32(0); i < s.max; i++ {
		*(*uint16)(unsafe.Add(s.wqe(i), 2)) = be16(uint16((i + 1) & (s.max - 1)))
	}
	s.head, s.tail = 0, s.max-1
}

// free mirrors rdma-core srq.c: mlx5_free_srq_wqe: the WQE goes to the
// tail of the free list.
func (s *srqQueue) free(ind uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		return
	}
	ind &= s.max - 1
	*(*uint16)(unsafe.Add(s.wqe(s.tail), 2)) = be16(uint16(ind))
	s.tail = ind
}

// post mirrors rdma-core srq.c: mlx5_post_srq_recv.
func (s *srqQueue) post(wrs []uverbs.RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil { // destroyed (srq.Destroy, under s.mu)
		return 0, uverbs.ErrClosed
	}
	var nreq int
	var err error
	for nreq = 0; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		if len(wr.SGL) > s.maxGS {
			err = postErr("post srq recv", syscall.EINVAL, "%d SGEs, the SRQ takes %d", len(wr.SGL), s.maxGS)
			break
		}
		if s.head == s.tail {
			err = errRQFull
			break
		}
		s.wrid[s.head] = wr.WRID
		next := s.wqe(s.head)
		s.head = uint32(be16(*(*uint16)(unsafe.Add(next, 2))))
		scat := unsafe.Add(next, srqNextSegSize)
		i := 0
		for ; i < len(wr.SGL); i++ {
			sg := &wr.SGL[i]
			setDataSeg(unsafe.Add(scat, i*dataSegSize), sg.Length, sg.LKey, sg.Addr)
		}
		if i < s.maxGS {
			setDataSeg(unsafe.Add(scat, i*dataSegSize), 0, invalidLKey, 0)
		}
	}
	if nreq > 0 {
		racePosted(unsafe.Pointer(s))
		s.count += uint16(nreq)
		mmio.ToDevice()
		*s.dbrec = be32(uint32(s.count))
	}
	return nreq, err
}
