package mlx5

import (
	"testing"
	"unsafe"

	"github.com/ibgo/ibgo/uverbs"
)

// benchQP is an RC QP whose UAR is plain memory (no syscall, no device).
func benchQP(tb testing.TB, sendWR uint32) *rig {
	q := vQP{Type: num(uverbs.QPTypeRC), QPN: 0x1a0, BfregIndex: 24,
		Requested: vCap{MaxSendWR: num(sendWR), MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}
	return newRig(tb, q, vCQ{CQN: 0x400, CQECnt: 4096}, vCQ{CQN: 0x401, CQECnt: 64})
}

func benchPost(b *testing.B, batch int) {
	r := benchQP(b, 128)
	// Each WR sends its own 64 bytes of one registered buffer, looked up as
	// the PD's lookup does it (the whole MR, then the range inside it).
	payload := make([]byte, 64*batch)
	r.sq.local = regLocal(payload)
	wrs := make([]uverbs.SendWR, batch)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendInline | uverbs.SendSignaled,
			SGL: []uverbs.SGE{{Addr: r.bytesOf(payload[64*i:]), Length: 64, LKey: 1}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.sq.post(wrs); err != nil {
			b.Fatal(err)
		}
		r.sq.tail.Store(r.sq.head) // retire without a CQ: only the post is timed
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/WQE")
}

// BenchmarkPostInline64 is one 64-byte inline SEND per post: WQE, doorbell
// record, barrier and the BlueFlame copy (2 WQEBBs... here 1: ds=6).
func BenchmarkPostInline64(b *testing.B) { benchPost(b, 1) }

// BenchmarkPostInline64List32 posts lists of 32 with one 8-byte doorbell.
func BenchmarkPostInline64List32(b *testing.B) { benchPost(b, 32) }

// BenchmarkPoll polls requester CQEs 16 at a time.
func BenchmarkPoll(b *testing.B) {
	r := benchQP(b, 128)
	c := r.scq
	n := c.ncqe
	// Every CQE completes WQE 0 (wr_id lookup and tail update still run).
	var tmpl [64]byte
	put32(unsafe.Pointer(&tmpl[0]), offSopDropQP, uint32(opSend)<<24|0x1a0)
	put32(unsafe.Pointer(&tmpl[0]), offSrqnUidx, 0)
	fill := func(lap uint32) {
		for i := uint32(0); i < n; i++ {
			p := c.cqe(i)
			*(*[64]byte)(p) = tmpl
			*(*uint8)(unsafe.Add(p, offOpOwn)) = cqeReq<<4 | uint8(lap&1)
		}
	}
	fill(0)
	wc := make([]uverbs.WC, 16)
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		k, err := c.poll(wc)
		if err != nil {
			b.Fatal(err)
		}
		done += k
		if c.consIndex%n == 0 {
			b.StopTimer()
			fill(c.consIndex / n)
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/CQE")
}

func TestPostPollAllocateNothing(t *testing.T) {
	r := benchQP(t, 128)
	payload := make([]byte, 64)
	wrs := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendInline | uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: r.bytesOf(payload), Length: 64, LKey: 1}}}}
	rwr := []uverbs.RecvWR{{SGL: []uverbs.SGE{{Addr: r.bytesOf(payload), Length: 64, LKey: 1}}}}
	wc := make([]uverbs.WC, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := r.sq.post(wrs); err != nil {
			t.Fatal(err)
		}
		r.sq.tail.Store(r.sq.head)
		if _, err := r.rq.post(rwr); err != nil {
			t.Fatal(err)
		}
		r.rq.tail.Store(r.rq.head)
		if _, err := r.scq.poll(wc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("post/poll allocate %v times per run", allocs)
	}
	// SQ full is an error path that must not allocate either.
	for {
		if _, err := r.sq.post(wrs); err != nil {
			break
		}
	}
	if a := testing.AllocsPerRun(50, func() { r.sq.post(wrs) }); a != 0 {
		t.Fatalf("SQ-full post allocates %v times", a)
	}
}
