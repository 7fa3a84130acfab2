package rxe

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

const testLKey = 0x42

// testQP is an rxe QP over fake rings: a 512-byte send WQE slot (room for 4
// SGEs or 128 inline bytes, as the kernel would size it), a doorbell that
// writes to /dev/null, and one "registered" buffer under testLKey.
type testQP struct {
	*qp
	sq, rq *fakeRing
	reg    []byte
}

func newTestQP(t testing.TB, typ uverbs.QPType, log2Slots uint) *testQP {
	t.Helper()
	sq := newFakeRing(t, 9, log2Slots, sendWQESize)
	rq := newFakeRing(t, 7, log2Slots, recvWQESize)
	reg := make([]byte, 4096)
	for i := range reg {
		reg[i] = byte(i)
	}
	q := &qp{typ: typ, hasRQ: true}
	q.sq.ring, q.sq.maxSGE, q.sq.maxInline = sq.r, 4, 128
	q.rq.ring, q.rq.maxSGE = rq.r, 4
	q.local = func(lkey uint32, addr uint64, n int) []byte {
		base := sys.Addr(reg)
		if lkey != testLKey || addr < base || addr-base+uint64(n) > uint64(len(reg)) {
			return nil
		}
		return reg[addr-base : addr-base+uint64(n)]
	}
	db, err := sys.NewArena(sys.Pagesize)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	q.dbArena = db
	q.doorbell, _ = db.AllocBuf(24)
	q.dbFD, err = sys.Open(os.DevNull, os.O_WRONLY)
	require.NoError(t, err)
	t.Cleanup(func() { q.dbFD.Close() })
	return &testQP{qp: q, sq: sq, rq: rq, reg: reg}
}

func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// The send WQE carries the offsets of struct rxe_send_wqe (rdma-core
// rxe.c: init_send_wqe); the SSN counts up.
func TestPostSendEncodesWQE(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 4)
	n, err := q.PostSend([]uverbs.SendWR{
		{WRID: 0x1122334455667788, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: 0x01020304,
			SGL:        []uverbs.SGE{{Addr: 0x1000, Length: 100, LKey: 7}, {Addr: 0x2000, Length: 28, LKey: 8}},
			RemoteAddr: 0xabcdef00, RKey: 0x55},
		{WRID: 2, Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{{Addr: 0x3000, Length: 8, LKey: 9}},
			RemoteAddr: 0x8000, RKey: 0x66, CompareAdd: 5},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.EqualValues(t, 2, q.sq.prod())
	w := q.sq.slot(0)
	require.EqualValues(t, 0x1122334455667788, le64(w, 0), "wr_id")
	require.EqualValues(t, uverbs.WRRDMAWriteWithImm, le32(w, 12), "opcode")
	require.EqualValues(t, uverbs.SendSignaled, le32(w, 16), "send_flags")
	require.EqualValues(t, 0x04030201, le32(w, 20), "imm_data, big-endian")
	require.EqualValues(t, 0xabcdef00, le64(w, 24), "wr.rdma.remote_addr")
	require.EqualValues(t, 0x55, le32(w, 32), "wr.rdma.rkey")
	require.EqualValues(t, 0xabcdef00, le64(w, 152), "iova")
	require.EqualValues(t, 0, le32(w, 176), "ssn")
	require.EqualValues(t, 128, le32(w, 184), "dma.length")
	require.EqualValues(t, 128, le32(w, 188), "dma.resid")
	require.EqualValues(t, 0, le32(w, 192), "dma.cur_sge")
	require.EqualValues(t, 2, le32(w, 196), "dma.num_sge")
	require.EqualValues(t, 0x1000, le64(w, 208), "sge[0].addr")
	require.EqualValues(t, 100, le32(w, 216), "sge[0].length")
	require.EqualValues(t, 7, le32(w, 220), "sge[0].lkey")
	require.EqualValues(t, 0x2000, le64(w, 224), "sge[1].addr")
	w = q.sq.slot(1)
	require.EqualValues(t, uverbs.WRAtomicFetchAndAdd, le32(w, 12))
	require.EqualValues(t, 0x8000, le64(w, 24), "wr.atomic.remote_addr")
	require.EqualValues(t, 5, le64(w, 32), "wr.atomic.compare_add")
	require.EqualValues(t, 0x66, le32(w, 48), "wr.atomic.rkey")
	require.EqualValues(t, 1, le32(w, 176), "ssn")
}

// Inline data is copied into the WQE from registered memory only; an SGE
// outside it is EINVAL and nothing is posted (the process never faults).
func TestPostSendInlineChecksRegisteredMemory(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 4)
	base := sys.Addr(q.reg)
	n, err := q.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: base + 10, Length: 20, LKey: testLKey}, {Addr: base + 100, Length: 12, LKey: testLKey}}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	w := q.sq.slot(0)
	require.EqualValues(t, 32, le32(w, 184))
	require.Equal(t, append(append([]byte{}, q.reg[10:30]...), q.reg[100:112]...), w[208:240])

	for name, sge := range map[string]uverbs.SGE{
		"custom IOVA":   {Addr: 0x10000000, Length: 16, LKey: testLKey},
		"wrong lkey":    {Addr: base, Length: 16, LKey: testLKey + 1},
		"past the end":  {Addr: base + 4090, Length: 16, LKey: testLKey},
		"address wraps": {Addr: ^uint64(0) - 4, Length: 16, LKey: testLKey},
	} {
		n, err := q.PostSend([]uverbs.SendWR{
			{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{{Addr: base, Length: 8, LKey: testLKey}}},
			{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{sge}}})
		require.ErrorIs(t, err, sys.EINVAL, name)
		require.Equal(t, 1, n, "%s: the valid WR before it is posted", name)
	}
	require.EqualValues(t, 5, q.sq.prod(), "each failing WR posted nothing")
}

func TestPostSendQueueFull(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 2) // 3 entries
	wrs := make([]uverbs.SendWR, 5)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend}
	}
	n, err := q.PostSend(wrs)
	require.Equal(t, 3, n)
	require.ErrorIs(t, err, ErrQueueFull)
	require.ErrorIs(t, err, sys.ENOMEM)
	for i := uint32(0); i < 3; i++ {
		require.EqualValues(t, i, le64(q.sq.slot(i), 0), "nothing overwritten")
	}
}

func TestPostRecvEncodesWQE(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 2)
	n, err := q.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: []uverbs.SGE{{Addr: 0x1000, Length: 64, LKey: 3}, {Addr: 0x2000, Length: 36, LKey: 4}}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	w := q.rq.slot(0)
	require.EqualValues(t, 9, le64(w, 0), "wr_id")
	require.EqualValues(t, 100, le32(w, 16), "dma.length")
	require.EqualValues(t, 100, le32(w, 20), "dma.resid")
	require.EqualValues(t, 2, le32(w, 28), "dma.num_sge")
	require.EqualValues(t, 0x1000, le64(w, 40), "sge[0].addr")
	require.EqualValues(t, 36, le32(w, 64), "sge[1].length")
	require.EqualValues(t, 4, le32(w, 68), "sge[1].lkey")
	// More SGEs than the queue takes.
	_, err = q.PostRecv([]uverbs.RecvWR{{SGL: make([]uverbs.SGE, 5)}})
	require.ErrorIs(t, err, sys.EINVAL)
}

// PostRecv reads the QP's state while another goroutine's Modify may be
// writing it (run with -race); a QP in RESET takes no receives.
func TestPostRecvReadsStateSafely(t *testing.T) {
	q := newTestQP(t, uverbs.QPTypeRC, 8)
	q.qp.qp = &uverbs.QP{} // zero value: RESET
	_, err := q.PostRecv([]uverbs.RecvWR{{WRID: 1}})
	require.ErrorIs(t, err, sys.EINVAL)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				q.PostRecv([]uverbs.RecvWR{{WRID: 1}})
				_ = q.qp.qp.State()
			}
		}()
	}
	wg.Wait()
}

// Destroy waits for posts in flight: the doorbell page and fd are used under
// the send queue's lock (run with -race: the doorbell used to be read after
// unlocking, while Destroy unmapped it).
func TestDestroyExcludesPostSend(t *testing.T) {
	for round := 0; round < 20; round++ {
		q := newTestQP(t, uverbs.QPTypeRC, 10)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wr := []uverbs.SendWR{{Opcode: uverbs.WRSend}}
				<-start
				for i := 0; i < 50; i++ {
					if _, err := q.PostSend(wr); err != nil {
						if !errors.Is(err, uverbs.ErrClosed) {
							t.Errorf("post: %v", err)
						}
						return
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(round%4) * 10 * time.Microsecond)
		require.NoError(t, q.Destroy())
		wg.Wait()
		_, err := q.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}})
		require.ErrorIs(t, err, uverbs.ErrClosed)
	}
}

// A rejected SRQ resize (MODIFY_SRQ fails) releases the ring: PostRecv and
// Destroy return. A limit-only modify takes no lock.
func TestSRQRejectedResizeReleasesRing(t *testing.T) {
	rq := newFakeRing(t, 6, 3, recvWQESize)
	s := &srq{}
	s.rq.ring, s.rq.maxSGE = rq.r, 1
	scratch := func(n int) []byte { return make([]byte, n) }
	attr := uverbs.SRQAttr{MaxWR: 1 << 30}
	s.ModifyData(&attr, uverbs.SRQAttrMaxWR, scratch)
	require.NoError(t, s.Modified(nil, &attr, uverbs.SRQAttrMaxWR, sys.NewErrno(sys.EINVAL)))
	s.ModifyData(&attr, uverbs.SRQAttrLimit, scratch)
	require.NoError(t, s.Modified(nil, &attr, uverbs.SRQAttrLimit, sys.NewErrno(sys.EINVAL)))
	s.ModifyData(&attr, uverbs.SRQAttrLimit, scratch)
	require.NoError(t, s.Modified(nil, &attr, uverbs.SRQAttrLimit, nil))
	done := make(chan error, 1)
	go func() {
		_, err := s.PostRecv([]uverbs.RecvWR{{WRID: 1}})
		if err == nil {
			err = s.Destroy()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("PostRecv blocked: the ring lock is still held after a rejected resize")
	}
	require.EqualValues(t, 1, rq.prod())
}

// The provider's cost per posted work request, doorbell (to /dev/null)
// included; a goroutine plays the kernel and consumes the send queue.
func BenchmarkPostSend(b *testing.B) {
	for _, tc := range []struct {
		name  string
		flags uverbs.SendFlags
	}{{"RDMAWrite", 0}, {"Inline64", uverbs.SendInline}} {
		b.Run(tc.name, func(b *testing.B) {
			q := newTestQP(b, uverbs.QPTypeRC, 6)
			wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: tc.flags | uverbs.SendSignaled,
				SGL: []uverbs.SGE{{Addr: sys.Addr(q.reg), Length: 64, LKey: testLKey}}, RemoteAddr: 0x1000, RKey: 1}}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := q.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				q.sq.setCons(q.sq.prod()) // the kernel took it
			}
		})
	}
}

// A send WQE is written whole: in a slot that held other bytes (a ring
// wraps) its header and SGEs (or inline bytes) end up exactly as in a zeroed
// one, for each kind of request, and a refused request leaves the SSN and
// the producer index alone (its slot stays free, whatever was written in it).
func TestPostSendWritesWholeWQE(t *testing.T) {
	sgl := func(n int) []uverbs.SGE {
		g := make([]uverbs.SGE, n)
		for i := range g {
			g[i] = uverbs.SGE{Addr: 0x1000*uint64(i+1) + 3, Length: uint32(100 + i), LKey: uint32(7 + i)}
		}
		return g
	}
	wr := func(op uverbs.WROpcode, flags uverbs.SendFlags, n int) uverbs.SendWR {
		return uverbs.SendWR{WRID: 0x1122334455667700 + uint64(op), Opcode: op, Flags: flags, SGL: sgl(n),
			RemoteAddr: 0xabcdef00 + uint64(n), RKey: 0x55 + uint32(n), Imm: 0x01020304}
	}
	cases := []struct {
		typ uverbs.QPType
		wr  uverbs.SendWR
		ok  bool // posted
	}{
		{uverbs.QPTypeRC, wr(uverbs.WRSend, uverbs.SendSignaled, 1), true},
		{uverbs.QPTypeRC, wr(uverbs.WRSend, 0, 0), true},
		{uverbs.QPTypeUC, wr(uverbs.WRSend, uverbs.SendSolicited|uverbs.SendFence, 4), true},
		{uverbs.QPTypeRC, wr(uverbs.WRRDMAWrite, uverbs.SendSignaled, 2), true},
		{uverbs.QPTypeUC, wr(uverbs.WRRDMAWrite, 0, 1), true},
		{uverbs.QPTypeRC, wr(uverbs.WRRDMARead, uverbs.SendSignaled, 3), true},
		{uverbs.QPTypeUC, wr(uverbs.WRRDMARead, 0, 1), false}, // refused: READ needs RC
		{uverbs.QPTypeUD, wr(uverbs.WRSend, 0, 1), false},     // UD needs its AH
		{uverbs.QPTypeRC, wr(uverbs.WRSend, 0, 5), false},     // more SGEs than the QP takes
		{uverbs.QPTypeRC, wr(uverbs.WRSendWithImm, 0, 1), true},
		{uverbs.QPTypeRC, wr(uverbs.WRRDMAWriteWithImm, 0, 1), true},
		{uverbs.QPTypeRC, wr(uverbs.WRAtomicFetchAndAdd, 0, 1), false},    // remote address not 8-aligned
		{uverbs.QPTypeRC, wr(uverbs.WRSend, uverbs.SendInline, 1), false}, // inline SGE not registered
		{uverbs.QPTypeRC, wr(uverbs.WRSendWithInv, 0, 1), true},
		{uverbs.QPTypeRC, uverbs.SendWR{Opcode: uverbs.WRSend, InlineData: []byte("abc")}, true},
		// 20 SGEs: within a maxSGE of 32 (set below), but 208 + 20*16
		// bytes do not fit the 512-byte WQE.
		{uverbs.QPTypeRC, wr(uverbs.WRSend, 0, 20), false},
	}
	for i, c := range cases {
		a, b := newTestQP(t, c.typ, 2), newTestQP(t, c.typ, 2)
		if len(c.wr.SGL) == 20 {
			a.qp.sq.maxSGE, b.qp.sq.maxSGE = 32, 32
		}
		for _, q := range []*testQP{a, b} {
			q.ssn = 41
			q.sq.setProd(1)
			q.sq.setCons(1)
		}
		for j := range a.sq.slot(1) {
			a.sq.slot(1)[j] = 0xa5 // b's slot stays zeroed
		}
		_, errA := a.PostSend([]uverbs.SendWR{c.wr})
		_, errB := b.PostSend([]uverbs.SendWR{c.wr})
		if !c.ok {
			require.Error(t, errA, "case %d", i)
			require.Error(t, errB, "case %d", i)
			require.EqualValues(t, 1, a.sq.prod(), "case %d: producer index", i)
			require.EqualValues(t, 41, a.ssn, "case %d: SSN", i)
			continue
		}
		require.NoError(t, errA, "case %d", i)
		require.NoError(t, errB, "case %d", i)
		used := sendWQESize + len(c.wr.SGL)*sgeSize // the header and its SGEs or inline bytes
		if c.wr.InlineData != nil {
			used = sendWQESize + len(c.wr.InlineData)
		}
		require.Equal(t, b.sq.slot(1)[:used], a.sq.slot(1)[:used], "case %d: the WQE's bytes over old ones", i)
		require.EqualValues(t, 2, a.sq.prod(), "case %d: producer index", i)
		require.EqualValues(t, 42, a.ssn, "case %d: SSN", i)
	}
	// A full ring refuses and says so.
	q := newTestQP(t, uverbs.QPTypeRC, 1) // one usable slot
	w := wr(uverbs.WRSend, 0, 1)
	_, err := q.PostSend([]uverbs.SendWR{w})
	require.NoError(t, err)
	_, err = q.PostSend([]uverbs.SendWR{w})
	require.ErrorIs(t, err, ErrQueueFull)
}
