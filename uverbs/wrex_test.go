package uverbs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/sys"
)

// recQP is a QPDriver that records what PostSend is given, copying each work
// request (and its SGEs and inline bytes, which the QPEx reuses).
type recQP struct {
	posts   int
	wrs     []SendWR
	failAt  int // PostSend fails at this index (-1: never)
	discard bool
}

func (r *recQP) DriverData() DriverData            { return DriverData{} }
func (r *recQP) Created(*QP, []byte) error         { return nil }
func (r *recQP) PostRecv(wr []RecvWR) (int, error) { return len(wr), nil }
func (r *recQP) Destroy() error                    { return nil }
func (r *recQP) PostSend(wr []SendWR) (int, error) {
	r.posts++
	for i := range wr {
		if i == r.failAt {
			return i, sys.NewErrno(sys.EINVAL)
		}
		if r.discard {
			continue
		}
		w := wr[i]
		w.SGL = append([]SGE(nil), w.SGL...)
		if w.InlineData != nil {
			w.InlineData = append([]byte{}, w.InlineData...)
		}
		r.wrs = append(r.wrs, w)
	}
	return len(wr), nil
}

func newRecQPEx(t testing.TB, typ QPType, ops SendOps, cp QPCap) (*QPEx, *recQP) {
	t.Helper()
	rec := &recQP{failAt: -1}
	qp := &QP{drv: rec, typ: typ, cap: cp}
	qp.ctx = &Context{dev: &Device{Name: "fake0"}}
	qp.ex = newQPEx(qp, ops)
	return qp.Ex(), rec
}

const allRCOps = SendOpRDMAWrite | SendOpRDMAWriteWithImm | SendOpSend | SendOpSendWithImm | SendOpRDMARead |
	SendOpAtomicCmpAndSwp | SendOpAtomicFetchAdd | SendOpSendWithInv | SendOpFlush | SendOpAtomicWrite

// Each builder produces the SendWR PostSend would take for the same
// operation, with the WRID and Flags current when it was called; setters
// complete the last one; the batch goes to the driver in one PostSend.
func TestQPExBuildsWorkRequests(t *testing.T) {
	x, rec := newRecQPEx(t, QPTypeRC, allRCOps, QPCap{MaxSendWR: 16, MaxSendSGE: 3, MaxInlineData: 32})
	payload := []byte("inline payload")
	x.Start()
	x.WRID, x.Flags = 1, SendSignaled
	x.Send()
	x.SetSGE(0x11, 0x1000, 64)
	x.WRID = 2
	x.SendImm(0xdeadbeef)
	x.SetInlineData(payload)
	payload[0] = 'X' // copied at the call: this must not show
	x.WRID, x.Flags = 3, 0
	x.RDMAWrite(0x22, 0x2000)
	x.SetSGEList([]SGE{{Addr: 1, Length: 2, LKey: 3}, {Addr: 4, Length: 5, LKey: 6}})
	x.WRID = 4
	x.RDMAWriteImm(0x23, 0x2008, 7)
	x.SetSGE(0x11, 0x1000, 0) // zero length: no SGE
	x.WRID = 5
	x.RDMARead(0x24, 0x3000)
	x.SetSGE(0x11, 0x1100, 16)
	x.WRID = 6
	x.AtomicCmpSwp(0x25, 0x4000, 10, 20)
	x.SetSGE(0x11, 0x1200, 8)
	x.WRID = 7
	x.AtomicFetchAdd(0x26, 0x4008, 3)
	x.SetSGE(0x11, 0x1208, 8)
	x.WRID = 8
	x.AtomicWrite(0x27, 0x4010, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	x.WRID = 9
	x.Flush(0x28, 0x5000, 4096, FlushGlobal, FlushMR)
	x.WRID = 10
	x.SendInv(0x99)
	x.SetInlineDataList([][]byte{[]byte("ab"), nil, []byte("cde")})
	require.Equal(t, 0, rec.posts, "nothing reaches the driver before Complete")
	require.NoError(t, x.Complete())
	require.Equal(t, 1, rec.posts, "one PostSend (one doorbell) per batch")

	want := []SendWR{
		{WRID: 1, Flags: SendSignaled, Opcode: WRSend, SGL: []SGE{{Addr: 0x1000, Length: 64, LKey: 0x11}}},
		{WRID: 2, Flags: SendSignaled | SendInline, Opcode: WRSendWithImm, Imm: 0xdeadbeef, InlineData: []byte("inline payload")},
		{WRID: 3, Opcode: WRRDMAWrite, RKey: 0x22, RemoteAddr: 0x2000, SGL: []SGE{{1, 2, 3}, {4, 5, 6}}},
		{WRID: 4, Opcode: WRRDMAWriteWithImm, RKey: 0x23, RemoteAddr: 0x2008, Imm: 7},
		{WRID: 5, Opcode: WRRDMARead, RKey: 0x24, RemoteAddr: 0x3000, SGL: []SGE{{0x1100, 16, 0x11}}},
		{WRID: 6, Opcode: WRAtomicCmpAndSwp, RKey: 0x25, RemoteAddr: 0x4000, CompareAdd: 10, Swap: 20, SGL: []SGE{{0x1200, 8, 0x11}}},
		{WRID: 7, Opcode: WRAtomicFetchAndAdd, RKey: 0x26, RemoteAddr: 0x4008, CompareAdd: 3, SGL: []SGE{{0x1208, 8, 0x11}}},
		{WRID: 8, Opcode: WRAtomicWrite, RKey: 0x27, RemoteAddr: 0x4010, InlineData: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{WRID: 9, Opcode: WRFlush, RKey: 0x28, RemoteAddr: 0x5000, FlushLength: 4096, FlushType: FlushGlobal, FlushLevel: FlushMR},
		{WRID: 10, Flags: SendInline, Opcode: WRSendWithInv, Imm: 0x99, InlineData: []byte("abcde")},
	}
	require.Equal(t, want, rec.wrs)

	// The next batch starts empty.
	x.Start()
	x.Send()
	require.NoError(t, x.Complete())
	require.Len(t, rec.wrs, len(want)+1)
}

// Errors are sticky and reported by Complete, which then posts nothing;
// Abort drops a batch; the lock is released on every path (a deadlock would
// hang the test).
func TestQPExErrors(t *testing.T) {
	x, rec := newRecQPEx(t, QPTypeRC, SendOpSend|SendOpRDMAWrite, QPCap{MaxSendWR: 2, MaxSendSGE: 1, MaxInlineData: 4})
	cases := map[string]struct {
		build func()
		is    error
	}{
		"op not in SendOps":   {func() { x.RDMARead(1, 2) }, ErrNotSupported},
		"setter before op":    {func() { x.SetSGE(1, 2, 3) }, ErrNoWR},
		"inline too long":     {func() { x.Send(); x.SetInlineData(make([]byte, 5)) }, sys.ENOSPC},
		"inline list too big": {func() { x.Send(); x.SetInlineDataList([][]byte{{1, 2, 3}, {4, 5}}) }, sys.ENOSPC},
		"too many SGEs":       {func() { x.Send(); x.SetSGEList(make([]SGE, 2)) }, sys.EINVAL},
		"batch deeper than the SQ": {func() {
			x.Send()
			x.Send()
			x.Send()
		}, sys.ENOMEM},
		"first error wins": {func() { x.RDMARead(1, 2); x.SetSGE(1, 2, 3) }, ErrNotSupported},
	}
	for name, c := range cases {
		x.Start()
		c.build()
		x.Send() // a valid WR after the error must not be posted either
		err := x.Complete()
		require.ErrorIs(t, err, c.is, name)
		require.Zero(t, rec.posts, name)
	}

	x.Start()
	x.Send()
	x.Abort()
	require.Zero(t, rec.posts, "abort posts nothing")
	x.Abort() // without a batch: no effect

	require.ErrorIs(t, x.Complete(), sys.EINVAL, "complete without start")

	// The provider's error comes back, saying how much was posted.
	rec.failAt = 1
	x.Start()
	x.Send()
	x.RDMAWrite(1, 0)
	err := x.Complete()
	require.ErrorIs(t, err, sys.EINVAL)
	require.Contains(t, err.Error(), "1 of 2 work requests posted")
}

func TestSendOpsString(t *testing.T) {
	require.Equal(t, "SEND|FLUSH|ATOMIC_WRITE", (SendOpSend | SendOpFlush | SendOpAtomicWrite).String())
	require.Equal(t, "0", SendOps(0).String())
	require.Equal(t, "RDMA_WRITE|0x10000", (SendOpRDMAWrite | 1<<16).String())
}

// The post path of the extended API allocates nothing: building a batch
// with every kind of setter and completing it.
func TestQPExDoesNotAllocate(t *testing.T) {
	x, rec := newRecQPEx(t, QPTypeUD, SendOpSend|SendOpSendWithImm, QPCap{MaxSendWR: 8, MaxSendSGE: 2, MaxInlineData: 64})
	rec.discard = true
	ah := &AH{}
	sgl := []SGE{{1, 2, 3}, {4, 5, 6}}
	data, list := []byte("0123456789"), [][]byte{[]byte("ab"), []byte("cd")}
	allocs := testing.AllocsPerRun(1000, func() {
		x.Start()
		x.WRID = 1
		x.Send()
		x.SetUDAddr(ah, 5, 0x11111111)
		x.SetSGE(1, 2, 3)
		x.SendImm(9)
		x.SetUDAddr(ah, 5, 0x11111111)
		x.SetSGEList(sgl)
		x.Send()
		x.SetUDAddr(ah, 5, 0x11111111)
		x.SetInlineData(data)
		x.Send()
		x.SetUDAddr(ah, 5, 0x11111111)
		x.SetInlineDataList(list)
		if err := x.Complete(); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkQPExPost(b *testing.B) {
	x, rec := newRecQPEx(b, QPTypeRC, SendOpRDMAWrite, QPCap{MaxSendWR: 64, MaxSendSGE: 1})
	rec.discard = true
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		x.Start()
		x.WRID = uint64(i)
		x.RDMAWrite(1, 0x1000)
		x.SetSGE(2, 0x2000, 64)
		if err := x.Complete(); err != nil {
			b.Fatal(err)
		}
	}
}

// recCQ is a CQDriver that hands out queued completions, like a ring.
type recCQ struct{ q []WC }

func (r *recCQ) DriverData() DriverData           { return DriverData{} }
func (r *recCQ) Created(*CQ, []byte) error        { return nil }
func (r *recCQ) ResizeData(int) DriverData        { return DriverData{} }
func (r *recCQ) Resized(*CQ, []byte, error) error { return nil }
func (r *recCQ) Destroy() error                   { return nil }
func (r *recCQ) Poll(wc []WC) (int, error) {
	n := copy(wc, r.q)
	r.q = r.q[n:]
	return n, nil
}

// StartPoll/NextPoll walk the completions in order, the getters read the
// current one's fields, an empty CQ is ErrCQEmpty (ENOENT), and completions
// not reached before EndPoll stay queued.
func TestCQExPoll(t *testing.T) {
	drv := &recCQ{}
	cq := &CQ{drv: drv}
	require.ErrorIs(t, cq.StartPoll(), ErrCQEmpty)
	require.ErrorIs(t, cq.StartPoll(), sys.ENOENT)
	require.ErrorIs(t, cq.NextPoll(), sys.EINVAL, "next without start")

	a := WC{WRID: 1, Status: WCSuccess, Opcode: WCRecvRDMAWithImm, VendorErr: 0, ByteLen: 100, Imm: 0xabcd, QPN: 17,
		SrcQP: 18, Flags: WCWithImm | WCWithGRH, PkeyIndex: 1, SLID: 2, SL: 3, DLIDPathBits: 4, Timestamp: 5}
	b := WC{WRID: 2, Status: WCRemAccessErr, Opcode: WCFlush, VendorErr: 0x55, QPN: 17}
	c := WC{WRID: 3, Opcode: WCRecv, Flags: WCWithInv, Imm: 0x1234}
	drv.q = []WC{a, b, c}
	require.NoError(t, cq.StartPoll())
	require.ErrorIs(t, cq.StartPoll(), sys.EINVAL, "start while active")
	read := func() WC {
		return WC{WRID: cq.WRID(), Status: cq.Status(), Opcode: cq.ReadOpcode(), VendorErr: cq.ReadVendorErr(),
			ByteLen: cq.ReadByteLen(), Imm: cq.ReadImmData(), QPN: cq.ReadQPNum(), SrcQP: cq.ReadSrcQP(),
			Flags: cq.ReadWCFlags(), PkeyIndex: cq.ReadPkeyIndex(), SLID: cq.ReadSLID(), SL: cq.ReadSL(),
			DLIDPathBits: cq.ReadDLIDPathBits(), Timestamp: cq.ReadCompletionTS()}
	}
	require.Equal(t, a, read())
	require.NoError(t, cq.NextPoll())
	require.Equal(t, b, read())
	cq.EndPoll()
	require.Len(t, drv.q, 1, "the third completion was not consumed")
	require.NoError(t, cq.StartPoll())
	require.EqualValues(t, 3, cq.WRID())
	require.EqualValues(t, 0x1234, cq.ReadInvalidatedRKey())
	require.ErrorIs(t, cq.NextPoll(), ErrCQEmpty)
	cq.EndPoll()

	cq.closed.Store(true)
	require.ErrorIs(t, cq.StartPoll(), ErrClosed)
}

func TestCQExPollDoesNotAllocate(t *testing.T) {
	drv := &recCQ{}
	cq := &CQ{drv: drv}
	backing := make([]WC, 2)
	var sum uint64
	allocs := testing.AllocsPerRun(1000, func() {
		drv.q = backing
		for err := cq.StartPoll(); err == nil; err = cq.NextPoll() {
			sum += cq.WRID() + uint64(cq.ReadByteLen()) + uint64(cq.ReadOpcode())
		}
		cq.EndPoll()
		if err := cq.StartPoll(); !errors.Is(err, ErrCQEmpty) {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkCQExPoll(b *testing.B) {
	drv := &recCQ{}
	cq := &CQ{drv: drv}
	backing := make([]WC, 16)
	b.ReportAllocs()
	for i := 0; i < b.N; i += 16 {
		drv.q = backing
		for err := cq.StartPoll(); err == nil; err = cq.NextPoll() {
			_ = cq.ReadByteLen()
		}
		cq.EndPoll()
	}
}

func TestCheckWCFlags(t *testing.T) {
	for _, f := range []WCExFlags{0, WCExStandard, WCExStandard | WCExCompletionTimestamp, WCExCompletionTimestampWallclock} {
		require.NoError(t, checkWCFlags(&CQInitAttr{WCFlags: f}))
	}
	for _, f := range []WCExFlags{WCExCVLAN, WCExFlowTag, WCExTMInfo, 1 << 20} {
		require.ErrorIs(t, checkWCFlags(&CQInitAttr{WCFlags: f}), ErrNotSupported, "%#x", uint64(f))
	}
}

// A deep send queue does not make the QPEx allocate its depth up front.
func TestQPExBatchMemoryIsBounded(t *testing.T) {
	x, _ := newRecQPEx(t, QPTypeRC, SendOpSend, QPCap{MaxSendWR: 1 << 20, MaxSendSGE: 2, MaxInlineData: 1024})
	require.Len(t, x.wrs, maxExBatch)
	require.Len(t, x.sges, maxExBatch*2)
	require.Len(t, x.inl, maxExInline)
	x, _ = newRecQPEx(t, QPTypeRC, SendOpAtomicWrite, QPCap{MaxSendWR: 4})
	require.Len(t, x.inl, 4*8, "room for the 8 bytes of each ATOMIC_WRITE without inline caps")
}

// BindMW and LocalInv build the WRBindMW and WRLocalInv work requests
// PostSend takes (ibv_wr_bind_mw, ibv_wr_local_inv); a posted bind gives the
// window its new key; a bad bind fails the batch.
func TestQPExBindMWAndLocalInv(t *testing.T) {
	x, rec := newRecQPEx(t, QPTypeRC, SendOpBindMW|SendOpLocalInv|SendOpSend, QPCap{MaxSendWR: 4, MaxSendSGE: 1})
	mw := &MW{typ: MWType2}
	mw.rkey.Store(0x1200)
	mr := &MR{}
	info := MWBindInfo{MR: mr, Addr: 0x1000, Length: 256, Access: AccessRemoteWrite}
	x.Start()
	x.WRID, x.Flags = 1, SendSignaled
	x.BindMW(mw, IncRKey(mw.RKey()), info)
	x.WRID = 2
	x.LocalInv(0x1201)
	require.NoError(t, x.Complete())
	require.Equal(t, []SendWR{
		{WRID: 1, Flags: SendSignaled, Opcode: WRBindMW, Bind: MWBindWR{MW: mw, RKey: 0x1201, Info: info}},
		{WRID: 2, Flags: SendSignaled, Opcode: WRLocalInv, Imm: 0x1201},
	}, rec.wrs)
	require.EqualValues(t, 0x1201, mw.RKey(), "the window is known by its new key once posted")
	require.Zero(t, x.wrs[0].Bind.MW, "the batch drops its window reference")

	for name, build := range map[string]func(){
		"no window": func() { x.BindMW(nil, 1, info) },
		"no MR":     func() { x.BindMW(mw, 1, MWBindInfo{Addr: 1, Length: 8}) },
	} {
		x.Start()
		build()
		require.ErrorIs(t, x.Complete(), sys.EINVAL, name)
	}
	y, _ := newRecQPEx(t, QPTypeRC, SendOpSend, QPCap{MaxSendWR: 4, MaxSendSGE: 1})
	y.Start()
	y.BindMW(mw, 1, info)
	require.ErrorIs(t, y.Complete(), ErrNotSupported, "BIND_MW not in SendOps")
}

func TestAccessStringNamesFlush(t *testing.T) {
	require.Equal(t, "REMOTE_WRITE|FLUSH_GLOBAL|FLUSH_PERSISTENT", (AccessRemoteWrite | AccessFlushGlobal | AccessFlushPersistent).String())
	require.Equal(t, "LOCAL_WRITE|0x400000", (AccessLocalWrite | 1<<22).String())
}
