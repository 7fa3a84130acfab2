package rxe

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
)

// fakeRing is a byte-level stand-in for a queue the kernel maps: struct
// rxe_queue_buf (log2_elem_size@0, index_mask@4, producer_index@128,
// consumer_index@256, data@384) in ordinary memory. Its methods play the
// kernel's side with the kernel's ordering (smp_load_acquire /
// smp_store_release, which Go's atomics are at least).
type fakeRing struct {
	mem  []byte
	r    *ring
	mask uint32
	elem int
}

func newFakeRing(t testing.TB, log2Elem, log2Slots uint, minElem int) *fakeRing {
	t.Helper()
	size := 384 + (1<<log2Slots)<<log2Elem
	words := make([]uint64, (size+7)/8) // 8-byte aligned, as a mapping is
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	binary.LittleEndian.PutUint32(mem[0:], uint32(log2Elem))
	binary.LittleEndian.PutUint32(mem[4:], 1<<log2Slots-1)
	r, err := newRing(mem, minElem)
	require.NoError(t, err)
	r.fake = true
	return &fakeRing{mem: mem, r: r, mask: 1<<log2Slots - 1, elem: 1 << log2Elem}
}

func (f *fakeRing) idx(off int) *uint32 { return (*uint32)(unsafe.Pointer(&f.mem[off])) }
func (f *fakeRing) prod() uint32        { return atomic.LoadUint32(f.idx(128)) }
func (f *fakeRing) cons() uint32        { return atomic.LoadUint32(f.idx(256)) }
func (f *fakeRing) setProd(v uint32)    { atomic.StoreUint32(f.idx(128), v) }
func (f *fakeRing) setCons(v uint32)    { atomic.StoreUint32(f.idx(256), v) }

// slot is element i's bytes where the kernel puts them.
func (f *fakeRing) slot(i uint32) []byte {
	off := 384 + int(i&f.mask)*f.elem
	return f.mem[off : off+f.elem]
}

// The Go mirror of struct rxe_queue_buf has the kernel's offsets.
func TestQueueBufLayout(t *testing.T) {
	var q abi.RxeQueueBuf
	require.EqualValues(t, 0, unsafe.Offsetof(q.Log2ElemSize))
	require.EqualValues(t, 4, unsafe.Offsetof(q.IndexMask))
	require.EqualValues(t, 128, unsafe.Offsetof(q.ProducerIndex))
	require.EqualValues(t, 256, unsafe.Offsetof(q.ConsumerIndex))
	require.EqualValues(t, 384, unsafe.Sizeof(q))
	require.Equal(t, 384, ringHdr)
}

// A header that would let an index reach outside the mapping is refused.
func TestNewRingRejectsBadHeaders(t *testing.T) {
	for _, tc := range []struct {
		name          string
		log2, mask    uint32
		size, minElem int
	}{
		{"mask not 2^n-1", 6, 5, 384 + 8*64, 0},
		{"zero mask", 6, 0, 384 + 64, 0},
		{"huge element", 17, 1, 384 + 2<<17, 0},
		{"elements past the mapping", 6, 15, 384 + 15*64, 0},
		{"element smaller than the WQE", 5, 3, 384 + 4*32, 48},
		{"no header", 0, 0, 100, 0},
	} {
		words := make([]uint64, (tc.size+7)/8)
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), tc.size)
		if tc.size >= 8 {
			binary.LittleEndian.PutUint32(mem[0:], tc.log2)
			binary.LittleEndian.PutUint32(mem[4:], tc.mask)
		}
		_, err := newRing(mem, tc.minElem)
		require.Error(t, err, tc.name)
	}
	// Misaligned memory is refused too.
	words := make([]uint64, 100)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 800)[4:]
	_, err := newRing(mem, 0)
	require.Error(t, err)
}

// Producing (send and receive queues): one slot stays empty, so a ring of
// 2^n slots takes 2^n-1 entries; indices are stored masked and wrap; each
// entry lands at data + (index & mask) << log2_elem_size.
func TestRingProduceWrapFull(t *testing.T) {
	f := newFakeRing(t, 6, 3, 0) // 8 slots of 64 bytes
	r := f.r
	require.Equal(t, 7, r.slots())
	seq := uint32(0)
	post := func() bool {
		if r.full() {
			return false
		}
		p := r.producerSlot()
		require.Equal(t, unsafe.Pointer(&f.slot(f.prod())[0]), p, "slot address")
		*(*uint32)(p) = seq
		seq++
		r.advanceProducer()
		return true
	}
	consumed := uint32(0)
	consume := func(n int) {
		for i := 0; i < n; i++ {
			c := f.cons()
			require.NotEqual(t, f.prod(), c, "kernel consumed from an empty ring")
			require.Equal(t, consumed, binary.LittleEndian.Uint32(f.slot(c)), "entries in order")
			consumed++
			f.setCons((c + 1) & f.mask)
		}
	}
	free := 7
	for round := 0; round < 5; round++ {
		n := 0
		for post() {
			n++
		}
		require.Equal(t, free, n, "round %d: entries before full", round)
		require.True(t, r.full())
		require.Equal(t, (f.cons()+7)&f.mask, f.prod())
		require.LessOrEqual(t, f.prod(), f.mask, "indices stay masked")
		free = 3 + round%4
		consume(free)
		require.False(t, r.full())
	}
	consume(int((f.prod() - f.cons()) & f.mask))
	require.Equal(t, seq, consumed)
	require.Equal(t, f.prod(), f.cons())
}

// Consuming (completion queues): empty when the indices meet; entries come
// out in order across the wrap.
func TestRingConsumeWrapEmpty(t *testing.T) {
	f := newFakeRing(t, 6, 2, 0) // 4 slots
	r := f.r
	require.True(t, r.empty())
	next, got := uint32(0), uint32(0)
	produce := func(n int) {
		for i := 0; i < n; i++ {
			p := f.prod()
			require.NotEqual(t, (p+1)&f.mask, f.cons(), "kernel produced into a full ring")
			binary.LittleEndian.PutUint32(f.slot(p), next)
			next++
			f.setProd((p + 1) & f.mask)
		}
	}
	for round := 0; round < 7; round++ {
		produce(1 + round%3)
		for !r.empty() {
			require.Equal(t, unsafe.Pointer(&f.slot(f.cons())[0]), r.consumerSlot())
			require.Equal(t, got, *(*uint32)(r.consumerSlot()))
			got++
			r.advanceConsumer()
			require.LessOrEqual(t, f.cons(), f.mask)
		}
	}
	require.Equal(t, next, got)
}

// A producer and a consumer on two goroutines: the entry written before the
// release of the producer index is what the acquiring side reads (the race
// detector checks the ordering; the values check the arithmetic).
func TestRingConcurrentProducerConsumer(t *testing.T) {
	f := newFakeRing(t, 4, 4, 0)
	r := f.r
	const total = 100000
	done := make(chan uint32)
	go func() { // the kernel, consuming a send queue
		want := uint32(0)
		for want < total {
			c := f.cons()
			if c == f.prod() {
				continue
			}
			got := *(*uint32)(unsafe.Pointer(&f.slot(c)[0]))
			if got != want {
				break
			}
			want++
			f.setCons((c + 1) & f.mask)
		}
		done <- want
	}()
	for i := uint32(0); i < total; {
		if r.full() {
			continue
		}
		*(*uint32)(r.producerSlot()) = i
		r.advanceProducer()
		i++
	}
	require.EqualValues(t, total, <-done)
}
