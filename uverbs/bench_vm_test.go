//go:build linux

package uverbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// loop is a connected RC pair ready for repeated posts: preallocated work
// requests and completion slices, so the measured path allocates nothing.
type loop struct {
	p        *pair
	send     []uverbs.SendWR
	recv     []uverbs.RecvWR
	wc       []uverbs.WC
	amr, zmr *uverbs.MR
}

func newLoop(t testing.TB, b *bed, op uverbs.WROpcode, size int, flags uverbs.SendFlags) *loop {
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	_, amr := b.mem(1<<20, allAccess)
	_, zmr := b.mem(1<<20, allAccess)
	l := &loop{p: p, amr: amr, zmr: zmr, wc: make([]uverbs.WC, 16)}
	l.send = []uverbs.SendWR{{WRID: 1, Opcode: op, Flags: uverbs.SendSignaled | flags, SGL: []uverbs.SGE{amr.SGE(0, size)},
		RemoteAddr: zmr.Addr(), RKey: zmr.RKey()}}
	l.recv = []uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{zmr.SGE(0, 1<<20)}}}
	return l
}

// once posts one work request (and its receive, for sends) and polls until
// it completes. It returns false on any failure rather than allocating an
// error message.
func (l *loop) once() bool {
	if l.send[0].Opcode == uverbs.WRSend {
		if n, err := l.p.z.PostRecv(l.recv); n != 1 || err != nil {
			return false
		}
	}
	if n, err := l.p.a.PostSend(l.send); n != 1 || err != nil {
		return false
	}
	for {
		n, err := l.p.acq.Poll(l.wc[:1])
		if err != nil {
			return false
		}
		if n == 1 {
			if l.wc[0].Status != uverbs.WCSuccess {
				return false
			}
			break
		}
	}
	if l.send[0].Opcode == uverbs.WRSend {
		for {
			n, err := l.p.zcq.Poll(l.wc[:1])
			if err != nil || n == 1 && l.wc[0].Status != uverbs.WCSuccess {
				return false
			}
			if n == 1 {
				break
			}
		}
	}
	return true
}

// The datapath allocates nothing: post, doorbell and poll, per work request.
func TestDatapathAllocatesNothing(t *testing.T) {
	b := newBed(t)
	for _, tc := range []struct {
		name  string
		op    uverbs.WROpcode
		size  int
		flags uverbs.SendFlags
	}{{"inline send 64", uverbs.WRSend, 64, uverbs.SendInline}, {"send 4096", uverbs.WRSend, 4096, 0},
		{"rdma write 4096", uverbs.WRRDMAWrite, 4096, 0}, {"rdma read 4096", uverbs.WRRDMARead, 4096, 0}} {
		l := newLoop(t, b, tc.op, tc.size, tc.flags)
		require.True(t, l.once(), tc.name)
		ok := true
		allocs := testing.AllocsPerRun(200, func() { ok = ok && l.once() })
		require.True(t, ok, tc.name)
		require.Zero(t, allocs, "%s: allocations per post+poll", tc.name)
	}
}

// BenchmarkPostPoll measures one signaled work request from post to polled
// completion on rxe in the VM: the provider's cost plus the kernel's
// soft-RoCE processing of the loopback packet.
func BenchmarkPostPoll(bm *testing.B) {
	for _, tc := range []struct {
		name  string
		op    uverbs.WROpcode
		size  int
		flags uverbs.SendFlags
	}{{"InlineSend64", uverbs.WRSend, 64, uverbs.SendInline}, {"RDMAWrite4K", uverbs.WRRDMAWrite, 4096, 0}} {
		bm.Run(tc.name, func(bm *testing.B) {
			b := newBed(bm)
			l := newLoop(bm, b, tc.op, tc.size, tc.flags)
			bm.SetBytes(int64(tc.size))
			bm.ReportAllocs()
			bm.ResetTimer()
			for i := 0; i < bm.N; i++ {
				if !l.once() {
					bm.Fatal("work request failed")
				}
			}
		})
	}
}

// BenchmarkSendRate posts unsignaled inline sends in batches of 16 (one
// signaled at the end) and reports the message rate.
func BenchmarkSendRate(bm *testing.B) {
	b := newBed(bm)
	p := b.pair(uverbs.QPTypeRC, uverbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64})
	_, amr := b.mem(4096, allAccess)
	_, zmr := b.mem(1<<20, allAccess)
	const batch = 16
	send := make([]uverbs.SendWR, batch)
	for i := range send {
		send[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendInline,
			SGL: []uverbs.SGE{amr.SGE(0, 64)}, RemoteAddr: zmr.Addr() + uint64(64*i), RKey: zmr.RKey()}
	}
	send[batch-1].Flags |= uverbs.SendSignaled
	wc := make([]uverbs.WC, 4)
	bm.ReportAllocs()
	bm.ResetTimer()
	for i := 0; i < bm.N; i += batch {
		if n, err := p.a.PostSend(send); n != batch || err != nil {
			bm.Fatalf("post: %d %v", n, err)
		}
		for {
			n, _ := p.acq.Poll(wc)
			if n > 0 {
				if wc[0].Status != uverbs.WCSuccess {
					bm.Fatal(wc[0].Status)
				}
				break
			}
		}
	}
	bm.StopTimer()
	bm.ReportMetric(float64(bm.N)/bm.Elapsed().Seconds(), "msg/s")
}
