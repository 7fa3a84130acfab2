package rxe

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// ring is one of the kernel's shared queues (struct rxe_queue_buf), mapped
// from the uverbs fd. The producer and consumer indices are kept masked;
// one slot always stays empty, so full is (prod+1)&mask == cons.
//
// Ordering mirrors rdma-core providers/rxe/rxe_queue.h: the side that owns
// an index loads it relaxed and publishes it with a release store; the other
// side's index is loaded with acquire. Go's sync/atomic operations are
// sequentially consistent, which is at least that.
type ring struct {
	mem      []byte
	hdr      *abi.RxeQueueBuf
	base     unsafe.Pointer // first element
	mask     uint32
	shift    uint32
	elemSize int
	fake     bool // not a mapping: unmap only forgets it
}

const ringHdr = int(unsafe.Sizeof(abi.RxeQueueBuf{}))

// mapRing maps the queue described by mi and checks the header the kernel
// wrote against the mapping, so no index can reach outside it.
func mapRing(c *uverbs.Context, mi abi.MmInfo, minElem int) (*ring, error) {
	if mi.Size == 0 {
		return nil, fmt.Errorf("rxe: the kernel gave no queue to map")
	}
	mem, err := sys.Mmap(c.CmdFD(), int64(mi.Offset), int(mi.Size), sys.PROT_READ|sys.PROT_WRITE, sys.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("rxe: mmap queue (offset %#x, %d bytes): %w", mi.Offset, mi.Size, err)
	}
	r, err := newRing(mem, minElem)
	if err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	return r, nil
}

// newRing checks the struct rxe_queue_buf header at the start of mem and
// returns the ring over it (mem is a mapping, or a fake ring in tests).
func newRing(mem []byte, minElem int) (*ring, error) {
	if len(mem) < ringHdr || uintptr(unsafe.Pointer(&mem[0]))&7 != 0 {
		return nil, fmt.Errorf("rxe: queue mapping of %d bytes is too short or misaligned", len(mem))
	}
	r := &ring{mem: mem, hdr: (*abi.RxeQueueBuf)(unsafe.Pointer(&mem[0]))}
	r.shift = atomic.LoadUint32(&r.hdr.Log2ElemSize)
	r.mask = atomic.LoadUint32(&r.hdr.IndexMask)
	if r.shift > 16 || r.mask == 0 || r.mask > 1<<24 || r.mask&(r.mask+1) != 0 {
		return nil, fmt.Errorf("rxe: queue header is malformed (log2_elem_size %d, index_mask %#x)", r.shift, r.mask)
	}
	r.elemSize = 1 << r.shift
	if r.elemSize < minElem || ringHdr+int(r.mask+1)*r.elemSize > len(mem) {
		return nil, fmt.Errorf("rxe: queue of %d %d-byte elements does not fit its %d-byte mapping (need elements of %d bytes)",
			r.mask+1, r.elemSize, len(mem), minElem)
	}
	r.base = unsafe.Pointer(&mem[ringHdr])
	return r, nil
}

// unmap releases a mapped ring. Fake rings (tests) are not mappings.
func (r *ring) unmap() {
	if r != nil && r.mem != nil {
		if !r.fake {
			sys.Munmap(r.mem)
		}
		r.mem, r.base = nil, nil
	}
}

func (r *ring) slot(i uint32) unsafe.Pointer {
	return unsafe.Add(r.base, uintptr(i&r.mask)<<r.shift)
}

// Producer-side operations (SQ, RQ, SRQ: we produce, the kernel consumes).

func (r *ring) full() bool {
	prod := atomic.LoadUint32(&r.hdr.ProducerIndex)
	cons := atomic.LoadUint32(&r.hdr.ConsumerIndex)
	return (prod+1)&r.mask == cons&r.mask
}

func (r *ring) producerSlot() unsafe.Pointer { return r.slot(atomic.LoadUint32(&r.hdr.ProducerIndex)) }

func (r *ring) advanceProducer() {
	prod := atomic.LoadUint32(&r.hdr.ProducerIndex)
	atomic.StoreUint32(&r.hdr.ProducerIndex, (prod+1)&r.mask)
}

// Consumer-side operations (CQ: the kernel produces, we consume).

func (r *ring) empty() bool {
	return atomic.LoadUint32(&r.hdr.ProducerIndex)&r.mask == atomic.LoadUint32(&r.hdr.ConsumerIndex)&r.mask
}

func (r *ring) consumerSlot() unsafe.Pointer { return r.slot(atomic.LoadUint32(&r.hdr.ConsumerIndex)) }

func (r *ring) advanceConsumer() {
	cons := atomic.LoadUint32(&r.hdr.ConsumerIndex)
	atomic.StoreUint32(&r.hdr.ConsumerIndex, (cons+1)&r.mask)
}

// slots is the ring's capacity in work requests (one slot stays empty).
func (r *ring) slots() int { return int(r.mask) }
