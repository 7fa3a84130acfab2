package rxe

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

const wcSize = int(unsafe.Sizeof(abi.WC{}))

// putWC writes a completion the way the kernel lays out struct ib_uverbs_wc
// (the element of an rxe CQ) and publishes it.
func (f *fakeRing) putWC(wrid uint64, status, opcode, byteLen, ex, flags uint32) {
	p := f.prod()
	b := f.slot(p)
	binary.LittleEndian.PutUint64(b[0:], wrid)
	binary.LittleEndian.PutUint32(b[8:], status)
	binary.LittleEndian.PutUint32(b[12:], opcode)
	binary.LittleEndian.PutUint32(b[20:], byteLen)
	binary.LittleEndian.PutUint32(b[24:], ex)
	binary.LittleEndian.PutUint32(b[28:], 0x11)  // qp_num
	binary.LittleEndian.PutUint32(b[32:], 0x22)  // src_qp
	binary.LittleEndian.PutUint32(b[36:], flags) // wc_flags
	f.setProd((p + 1) & f.mask)
}

func TestWCLayout(t *testing.T) {
	var w abi.WC
	require.Equal(t, 48, wcSize)
	require.EqualValues(t, 24, unsafe.Offsetof(w.Ex))
	require.EqualValues(t, 36, unsafe.Offsetof(w.WCFlags))
	require.EqualValues(t, 44, unsafe.Offsetof(w.SL))
}

func TestCQPollWrapsAndDecodes(t *testing.T) {
	f := newFakeRing(t, 6, 2, wcSize) // 4 slots: 3 entries at most
	q := &cq{ring: f.r}
	wc := make([]uverbs.WC, 2)
	n, err := q.Poll(wc)
	require.NoError(t, err)
	require.Zero(t, n)
	next := uint64(0)
	for round := 0; round < 6; round++ {
		for i := 0; i < 3; i++ {
			f.putWC(next+uint64(i), 0, uint32(uverbs.WCRecv), 100, 0x01020304, uint32(uverbs.WCWithImm))
		}
		got := 0
		for got < 3 {
			n, err := q.Poll(wc)
			require.NoError(t, err)
			require.NotZero(t, n)
			for _, w := range wc[:n] {
				require.Equal(t, next, w.WRID)
				require.Equal(t, uverbs.WCRecv, w.Opcode)
				require.EqualValues(t, 100, w.ByteLen)
				require.EqualValues(t, 0x04030201, w.Imm, "imm_data is big-endian in the CQE")
				require.EqualValues(t, 0x11, w.QPN)
				require.EqualValues(t, 0x22, w.SrcQP)
				next++
			}
			got += n
		}
		require.Equal(t, f.prod(), f.cons())
	}
}

// Between ResizeData and Resized, Poll waits: the kernel is copying the
// pending completions into the new ring and rewriting the old consumer
// index. A rejected resize keeps the old ring and releases Poll.
func TestCQResizeExcludesPoll(t *testing.T) {
	f := newFakeRing(t, 6, 3, wcSize)
	q := &cq{ring: f.r}
	f.putWC(7, 0, 0, 8, 0, 0)
	q.ResizeData(100)
	polled := make(chan int, 1)
	go func() {
		n, _ := q.Poll(make([]uverbs.WC, 4))
		polled <- n
	}()
	select {
	case n := <-polled:
		t.Fatalf("Poll returned %d completions during a resize", n)
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, q.Resized(nil, nil, sys.NewErrno(sys.EINVAL)))
	select {
	case n := <-polled:
		require.Equal(t, 1, n, "the old ring is still polled after a rejected resize")
	case <-time.After(10 * time.Second):
		t.Fatal("Poll still blocked after Resized")
	}

	// A resize that succeeds: the kernel copied the pending completion into
	// the new ring; Poll then reads it from there, once.
	f.putWC(8, 0, 0, 8, 0, 0)
	q.ResizeData(100)
	g := newFakeRing(t, 6, 4, wcSize)
	g.putWC(8, 0, 0, 8, 0, 0)
	f.setCons(f.prod()) // what the kernel does to the old ring
	q.swapRing(g.r)
	q.mu.Unlock() // what Resized does after mapping
	wc := make([]uverbs.WC, 4)
	n, err := q.Poll(wc)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.EqualValues(t, 8, wc[0].WRID)
	require.Nil(t, f.r.mem, "the old ring is released")
}

// The cost of the exclusion on the path that matters: polling an empty CQ
// (the latency loop) and taking one completion.
func BenchmarkPoll(b *testing.B) {
	f := newFakeRing(b, 6, 6, wcSize)
	q := &cq{ring: f.r}
	wc := make([]uverbs.WC, 1)
	b.Run("Empty", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			q.Poll(wc)
		}
	})
	b.Run("One", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f.setProd((f.prod() + 1) & f.mask)
			q.Poll(wc)
		}
	})
}
