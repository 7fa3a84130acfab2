package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// fakeKernel is a Context whose command file is one end of a pipe: ioctls
// fail with ENOTTY (so every command falls back to write), and writes either
// succeed without writing a response (accept: the write end) or fail with
// EBADF (reject: the read end). Commands can be read back from the pipe.
type fakeKernel struct {
	c    *Context
	r, w *sys.FD
}

func newFakeKernel(t *testing.T, accept bool, prov ProviderContext) *fakeKernel {
	t.Helper()
	r, w, err := sys.Pipe()
	require.NoError(t, err)
	arena, err := sys.NewArena(arenaSize)
	require.NoError(t, err)
	fd := w
	if !accept {
		fd = r
	}
	k := &fakeKernel{r: r, w: w}
	k.c = &Context{dev: &Device{Name: "fake0", DriverID: 14}, prov: prov, fd: fd, arena: arena,
		noIoctl: map[[2]uint16]bool{}, live: map[uint64]any{}}
	t.Cleanup(func() {
		k.c.Close()
		r.Close()
		w.Close()
	})
	return k
}

// commands returns the write-command numbers sent so far (accepting kernel).
func (k *fakeKernel) commands(t *testing.T) []uint32 {
	t.Helper()
	var out []uint32
	a, err := sys.NewArena(1 << 16)
	require.NoError(t, err)
	defer a.Close()
	k.w.Close() // EOF after what was written
	buf := make([]byte, 1<<16)
	n, err := sys.Read(k.r, buf)
	require.NoError(t, err)
	b := buf[:n]
	for len(b) >= 8 {
		h := abi.As[abi.CmdHdr](b)
		out = append(out, h.Command)
		size := int(h.InWords) * 4
		if h.Command&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
			size = 8 + 16 + int(h.InWords)*8 + int(abi.As[abi.ExCmdHdr](b[8:]).ProviderInWords)*8
		}
		require.GreaterOrEqual(t, len(b), size)
		b = b[size:]
	}
	return out
}

func TestCreateCloseLifecycle(t *testing.T) {
	k := newFakeKernel(t, true, nil)
	pd, err := k.c.AllocPD()
	require.NoError(t, err)
	require.Equal(t, map[string]int{"pd": 1}, k.c.LiveObjects())
	require.Equal(t, uint64(1), pd.id)
	require.NoError(t, pd.Close())
	require.NoError(t, pd.Close(), "Close is idempotent")
	require.Empty(t, k.c.LiveObjects())
	require.ErrorIs(t, pd.check(), ErrClosed)
	require.Equal(t, []uint32{abi.IB_USER_VERBS_CMD_ALLOC_PD, abi.IB_USER_VERBS_CMD_DEALLOC_PD}, k.commands(t))
}

func TestCreateRejectedLeavesNothing(t *testing.T) {
	k := newFakeKernel(t, false, nil)
	_, err := k.c.AllocPD()
	require.ErrorIs(t, err, sys.EBADF)
	var ue *Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "alloc pd", ue.Op)
	require.Empty(t, k.c.LiveObjects())
	require.Equal(t, uint64(0), k.c.nextID, "no user handle consumed")
}

func TestCloseAfterContextClose(t *testing.T) {
	k := newFakeKernel(t, true, nil)
	pd, err := k.c.AllocPD()
	require.NoError(t, err)
	require.NoError(t, k.c.Close())
	require.NoError(t, pd.Close(), "the context took the PD with it")
	_, err = k.c.AllocPD()
	require.ErrorIs(t, err, ErrClosed)
}

// fakeProv hands out fake drivers.
type fakeProv struct {
	ProviderContext
	cq  *fakeCQ
	srq *fakeSRQ
}

func (p *fakeProv) NewCQ(*CQInitAttr) (CQDriver, error)    { return p.cq, nil }
func (p *fakeProv) NewSRQ(*SRQInitAttr) (SRQDriver, error) { return p.srq, nil }
func (p *fakeProv) Close() error                           { return nil }

// fakeCQ excludes Poll from ResizeData to Resized, as the contract asks.
type fakeCQ struct {
	mu         sync.Mutex
	createdErr error
	calls      []string
	resizedErr error
	destroyed  int
	refuse     error // ResizeData's DriverData.Refuse
	onCreated  func()
	destroyErr error
}

func (f *fakeCQ) DriverData() DriverData { return DriverData{} }
func (f *fakeCQ) Created(*CQ, []byte) error {
	f.calls = append(f.calls, "created")
	if f.onCreated != nil {
		f.onCreated()
	}
	return f.createdErr
}
func (f *fakeCQ) Poll([]WC) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 0, nil
}
func (f *fakeCQ) ResizeData(int) DriverData {
	f.mu.Lock()
	f.calls = append(f.calls, "resizeData")
	return DriverData{Refuse: f.refuse}
}
func (f *fakeCQ) Resized(_ *CQ, _ []byte, err error) error {
	f.calls = append(f.calls, "resized")
	f.resizedErr = err
	f.mu.Unlock()
	return nil
}
func (f *fakeCQ) Destroy() error { f.destroyed++; return f.destroyErr }

// A provider hook that fails must leave neither a kernel object nor provider
// state behind.
func TestCreateProviderFailureDestroys(t *testing.T) {
	drv := &fakeCQ{createdErr: errors.New("ring map failed")}
	k := newFakeKernel(t, true, &fakeProv{cq: drv})
	_, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	require.ErrorContains(t, err, "ring map failed")
	require.Equal(t, 1, drv.destroyed)
	require.Empty(t, k.c.LiveObjects())
	require.Equal(t, []uint32{abi.IB_USER_VERBS_CMD_CREATE_CQ, abi.IB_USER_VERBS_CMD_DESTROY_CQ}, k.commands(t))
}

// When the compensating destroys fail as well, the error says so: the kernel
// object may be left behind (before the fix their errors were dropped and
// only the hook's error came back).
func TestCreateProviderFailureReportsFailedDestroy(t *testing.T) {
	drv := &fakeCQ{createdErr: errors.New("ring map failed"), destroyErr: errors.New("munmap failed")}
	var k *fakeKernel
	drv.onCreated = func() { k.c.fd = k.r } // the kernel refuses the DESTROY_CQ
	k = newFakeKernel(t, true, &fakeProv{cq: drv})
	_, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	k.c.fd = k.w
	require.ErrorContains(t, err, "ring map failed")
	require.ErrorIs(t, err, sys.EBADF, "the failed DESTROY_CQ is reported")
	require.ErrorContains(t, err, "destroying the kernel object again")
	require.ErrorContains(t, err, "munmap failed", "the provider's failed Destroy is reported")
	require.Equal(t, 1, drv.destroyed)
	require.Empty(t, k.c.LiveObjects())
}

// Defect 2: Resize must bracket the command with ResizeData/Resized on
// every path, so the provider's Poll exclusion is always released (before
// the fix a rejected resize never called Resized).
func TestCQResizeAlwaysCallsResized(t *testing.T) {
	for _, accept := range []bool{true, false} {
		drv := &fakeCQ{}
		k := newFakeKernel(t, true, &fakeProv{cq: drv})
		cq, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
		require.NoError(t, err)
		if !accept {
			k.c.fd = k.r // the kernel rejects the resize
			defer func() { k.c.fd = k.w }()
		}
		drv.calls = nil
		err = cq.Resize(8)
		require.Equal(t, []string{"resizeData", "resized"}, drv.calls, "accept=%v", accept)
		if accept {
			require.NoError(t, err)
			require.NoError(t, drv.resizedErr)
		} else {
			require.ErrorIs(t, err, sys.EBADF)
			require.ErrorIs(t, drv.resizedErr, sys.EBADF, "Resized learns the command failed")
		}
		done := make(chan struct{})
		go func() { cq.Poll(nil); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("accept=%v: Poll still excluded after Resize returned", accept)
		}
		require.Error(t, cq.Resize(0), "cqe 0 is refused before the provider is asked")
		require.Equal(t, []string{"resizeData", "resized"}, drv.calls)
	}
}

// fakeSRQ models rxe: a resize holds the ring lock from ModifyData to
// Modified.
type fakeSRQ struct {
	mu          sync.Mutex
	modified    int
	modifiedErr error
	refuse      error // ModifyData's DriverData.Refuse
}

func (f *fakeSRQ) DriverData() DriverData     { return DriverData{} }
func (f *fakeSRQ) Created(*SRQ, []byte) error { return nil }
func (f *fakeSRQ) ModifyData(_ *SRQAttr, mask SRQAttrMask, scratch func(int) []byte) DriverData {
	if mask&SRQAttrMaxWR != 0 {
		f.mu.Lock()
	}
	return DriverData{In: scratch(8), Refuse: f.refuse}
}
func (f *fakeSRQ) Modified(_ *SRQ, _ *SRQAttr, mask SRQAttrMask, err error) error {
	f.modified++
	f.modifiedErr = err
	if mask&SRQAttrMaxWR != 0 {
		f.mu.Unlock()
	}
	return nil
}
func (f *fakeSRQ) PostRecv([]RecvWR) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 0, nil
}
func (f *fakeSRQ) Destroy() error { return nil }

// Defect 1 (uverbs side): a modify the kernel rejects must still reach the
// provider's Modified, or rxe's ring lock stays held and PostRecv hangs.
func TestSRQModifyRejectedCallsModified(t *testing.T) {
	drv := &fakeSRQ{}
	k := newFakeKernel(t, true, &fakeProv{srq: drv})
	pd, err := k.c.AllocPD()
	require.NoError(t, err)
	srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	k.c.fd = k.r // from now on the kernel rejects everything
	err = srq.Modify(SRQAttr{MaxWR: 64}, SRQAttrMaxWR)
	require.ErrorIs(t, err, sys.EBADF)
	require.Equal(t, 1, drv.modified)
	require.ErrorIs(t, drv.modifiedErr, sys.EBADF)
	require.True(t, drv.mu.TryLock(), "the ring lock was released")
	drv.mu.Unlock()
	require.Equal(t, uint32(0), srq.MaxWR(), "a rejected resize changes nothing")
	k.c.fd = k.w
}

// fakeCompChannel is a completion channel of k read from a pipe: the test
// writes event records (a CQ id each) to w, which closes with the test.
func fakeCompChannel(t *testing.T, k *fakeKernel) (*CompChannel, *sys.FD) {
	r, w, err := sys.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	pfd, err := sys.NewPollFD(r, "fake-channel")
	require.NoError(t, err)
	ch := &CompChannel{fd: pfd}
	ch.ctx, ch.kind, ch.id = k.c, kindCompChannel, 100
	k.c.live[100] = ch
	return ch, w
}

// Defect 11: concurrent GetEvent calls must not share a read buffer (the
// race detector reports it; each caller must also get its own event).
func TestCompChannelConcurrentGetEvent(t *testing.T) {
	k := newFakeKernel(t, true, nil)
	ch, w := fakeCompChannel(t, k)
	const n = 8
	cqs := map[*CQ]bool{}
	for i := 1; i <= n; i++ {
		cq := &CQ{drv: &fakeCQ{}}
		cq.ctx, cq.kind, cq.id = k.c, kindCQ, uint64(i)
		k.c.live[cq.id] = cq
		cqs[cq] = true
	}
	a, err := sys.NewArena(8 * n)
	require.NoError(t, err)
	defer a.Close()
	for i := 1; i <= n; i++ {
		b, _ := a.AllocBuf(8)
		binary.LittleEndian.PutUint64(b.Bytes(), uint64(i))
		require.NoError(t, sys.Write(w, b))
	}
	var wg sync.WaitGroup
	got := make(chan *CQ, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cq, err := ch.GetEvent(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			got <- cq
		}()
	}
	wg.Wait()
	close(got)
	seen := map[*CQ]bool{}
	for cq := range got {
		require.True(t, cqs[cq])
		require.False(t, seen[cq], "one event delivered twice")
		seen[cq] = true
		d, _ := cq.Events()
		require.Equal(t, 1, d)
	}
	require.Len(t, seen, n)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = ch.GetEvent(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, ch.Close())
	require.NoError(t, ch.Close())
	_, err = ch.GetEvent(context.Background())
	require.ErrorIs(t, err, ErrClosed)
}

func TestSGEBytes(t *testing.T) {
	k := newFakeKernel(t, true, nil)
	pd, err := k.c.AllocPD()
	require.NoError(t, err)
	mem, err := AllocMemory(4096, MemoryOptions{})
	require.NoError(t, err)
	defer mem.Close()
	mr, err := pd.RegMRIOVA(mem.Bytes(), 0x10000, AccessLocalWrite)
	require.NoError(t, err)
	mr.lkey = 7 // the fake kernel answers zeros
	g := pd.MRGeneration().Load()
	pd.setMR(mr, true)
	require.Equal(t, g+1, pd.MRGeneration().Load(), "a registration change moves the generation")
	mem.Bytes()[100] = 0xab
	va := sys.Addr(mem.Bytes())
	b, ok := pd.SGEBytes(SGE{Addr: va + 100, Length: 4, LKey: 7})
	require.True(t, ok)
	require.Equal(t, byte(0xab), b[0])
	require.Len(t, b, 4)
	for _, bad := range []SGE{
		{Addr: va + 4094, Length: 4, LKey: 7}, // runs past the end
		{Addr: va - 1, Length: 1, LKey: 7},    // before the start
		{Addr: va, Length: 1, LKey: 8},        // another key
		{Addr: 0x10000, Length: 1, LKey: 7},   // the IOVA, not the VA
	} {
		_, ok := pd.SGEBytes(bad)
		require.False(t, ok, "%+v", bad)
		base, r := pd.Registered(bad.LKey, bad.Addr, int(bad.Length))
		require.Nil(t, r, "%+v", bad)
		require.Zero(t, base)
	}
	// Registered answers the whole MR, whichever range inside it is asked.
	base, r := pd.Registered(7, va+4000, 96)
	require.Equal(t, va, base)
	require.Len(t, r, 4096)
	require.Equal(t, byte(0xab), r[100])
	require.Equal(t, 0.0, testing.AllocsPerRun(100, func() { pd.SGEBytes(SGE{Addr: va, Length: 8, LKey: 7}) }))
	g = pd.MRGeneration().Load()
	require.NoError(t, mr.Close())
	require.NotEqual(t, g, pd.MRGeneration().Load(), "deregistration moves the generation")
	_, ok = pd.SGEBytes(SGE{Addr: va, Length: 1, LKey: 7})
	require.False(t, ok, "a closed MR is no longer registered memory")
}

// A command racing with Close must not go out with the destroyed object's
// handle (the kernel may already have reused it): the closed check is made
// again under the command lock.
func TestCommandRacingCloseSendsNothing(t *testing.T) {
	k := newFakeKernel(t, true, &fakeProv{cq: &fakeCQ{}})
	cq, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	require.NoError(t, err)
	k.c.mu.Lock()
	done := make(chan error, 1)
	go func() { done <- cq.ReqNotify(false) }()
	time.Sleep(20 * time.Millisecond) // ReqNotify is past its first check, waiting for the lock
	cq.closed.Store(true)             // what closeObject does under the lock
	k.c.mu.Unlock()
	require.ErrorIs(t, <-done, ErrClosed)
	require.Equal(t, []uint32{abi.IB_USER_VERBS_CMD_CREATE_CQ}, k.commands(t))
}

// CQ, QP and SRQ creation go through their ioctl methods first (method id 0
// is a real method: CQ_CREATE, QP_CREATE, SRQ_CREATE), falling back to write
// only once the kernel refused; PD, MR and AH have no ioctl create method.
func TestCreateTriesIoctlFirst(t *testing.T) {
	k := newFakeKernel(t, true, &fakeProv{cq: &fakeCQ{}, srq: &fakeSRQ{}})
	_, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	require.NoError(t, err)
	pd, err := k.c.AllocPD()
	require.NoError(t, err)
	_, err = pd.CreateSRQ(SRQInitAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	require.Equal(t, map[[2]uint16]bool{
		{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE}:   true,
		{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE}: true,
	}, k.c.noIoctl, "the fake kernel's ENOTTY marks exactly the methods tried")
}

// Close on a nil object is a no-op for every type, as io.Closer users
// (deferred cleanups of half-built resources) expect.
func TestCloseNilObjects(t *testing.T) {
	for name, c := range map[string]interface{ Close() error }{
		"Context": (*Context)(nil), "PD": (*PD)(nil), "MR": (*MR)(nil), "CompChannel": (*CompChannel)(nil),
		"CQ": (*CQ)(nil), "QP": (*QP)(nil), "SRQ": (*SRQ)(nil), "AH": (*AH)(nil), "Memory": (*Memory)(nil),
	} {
		require.NotPanics(t, func() { require.NoError(t, c.Close(), name) }, name)
	}
}

// A provider that cannot build the request (mlx5: CQ and SRQ resize) sets
// DriverData.Refuse: nothing goes to the kernel (which would fail with a
// misleading errno, EFAULT for an empty RESIZE_CQ request on mlx5), the
// completion hook still runs and the caller gets ErrNotSupported.
func TestResizeRefusedByProviderSendsNothing(t *testing.T) {
	refuse := fmt.Errorf("%w: resizing a fake queue", ErrNotSupported)
	cqd := &fakeCQ{refuse: refuse}
	srqd := &fakeSRQ{refuse: refuse}
	k := newFakeKernel(t, true, &fakeProv{cq: cqd, srq: srqd})
	cq, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	require.NoError(t, err)
	pd, err := k.c.AllocPD()
	require.NoError(t, err)
	srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)

	cqd.calls = nil
	err = cq.Resize(8)
	require.ErrorIs(t, err, ErrNotSupported)
	require.ErrorContains(t, err, "resizing a fake queue")
	require.Equal(t, []string{"resizeData", "resized"}, cqd.calls, "Resized still ends the exclusion")
	require.ErrorIs(t, cqd.resizedErr, ErrNotSupported)
	require.True(t, cqd.mu.TryLock(), "Poll is no longer excluded")
	cqd.mu.Unlock()

	err = srq.Modify(SRQAttr{MaxWR: 64}, SRQAttrMaxWR)
	require.ErrorIs(t, err, ErrNotSupported)
	require.Equal(t, 1, srqd.modified)
	require.True(t, srqd.mu.TryLock(), "Modified released what ModifyData took")
	srqd.mu.Unlock()

	require.Equal(t, []uint32{abi.IB_USER_VERBS_CMD_CREATE_CQ, abi.IB_USER_VERBS_CMD_ALLOC_PD, abi.IB_USER_VERBS_CMD_CREATE_SRQ},
		k.commands(t), "no RESIZE_CQ or MODIFY_SRQ was sent")
}

// CompChannel.FD and Context.AsyncFD say -1 once closed, not a number the
// process may have reused for another file.
func TestEventFDsAfterClose(t *testing.T) {
	k := newFakeKernel(t, true, &fakeProv{})
	pollPipe := func() *sys.PollFD {
		r, w, err := sys.Pipe()
		require.NoError(t, err)
		t.Cleanup(func() { w.Close() })
		p, err := sys.NewPollFD(r, "test")
		require.NoError(t, err)
		return p
	}
	ch := &CompChannel{fd: pollPipe()}
	ch.object.ctx, ch.object.kind = k.c, kindCompChannel
	require.GreaterOrEqual(t, ch.FD(), 0)
	require.NoError(t, ch.Close())
	require.Equal(t, -1, ch.FD())

	k.c.asyncFD = pollPipe()
	require.GreaterOrEqual(t, k.c.AsyncFD(), 0)
	require.NoError(t, k.c.Close())
	require.Equal(t, -1, k.c.AsyncFD())
}

// Sizes that do not fit the command or the page rounding are refused with
// EINVAL naming the value, before anything is sent or mapped (before the
// fix uint32(cqe) truncated 1<<32+4 to 4, and size+align-1 overflowed).
func TestOversizedArgumentsRefused(t *testing.T) {
	drv := &fakeCQ{}
	k := newFakeKernel(t, true, &fakeProv{cq: drv})
	huge := math.MaxUint32 + 5
	_, err := k.c.CreateCQ(CQInitAttr{CQE: huge})
	require.ErrorIs(t, err, sys.EINVAL)
	require.ErrorContains(t, err, strconv.Itoa(huge))
	cq, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	require.NoError(t, err)
	drv.calls = nil
	err = cq.Resize(huge)
	require.ErrorIs(t, err, sys.EINVAL)
	require.ErrorContains(t, err, strconv.Itoa(huge))
	require.Empty(t, drv.calls, "the provider was not asked")
	require.Equal(t, []uint32{abi.IB_USER_VERBS_CMD_CREATE_CQ}, k.commands(t), "only the valid CQ was created")

	for _, size := range []int{math.MaxInt, math.MaxInt - 100} {
		_, err = AllocMemory(size, MemoryOptions{})
		require.ErrorIs(t, err, sys.EINVAL, "size %d", size)
		require.ErrorContains(t, err, strconv.Itoa(size))
	}
}

// eventCQ is a provider CQ that counts the completion events it is told
// of (rdma-core's cq_event op).
type eventCQ struct {
	fakeCQ
	events atomic.Int32
}

func (c *eventCQ) Event() { c.events.Add(1) }

// Issue 30, item 2: GetEvent tells the provider's CQ of each event, as
// libibverbs' ibv_get_cq_event calls cq_event: mlx5 advances its arm
// sequence number there, and re-arms with a stale one are ignored by the
// HCA. Before, the hook had no caller.
func TestGetEventCallsProviderHook(t *testing.T) {
	k := newFakeKernel(t, true, nil)
	ch, w := fakeCompChannel(t, k)
	drv := &eventCQ{}
	cq := &CQ{drv: drv}
	cq.ctx, cq.kind, cq.id = k.c, kindCQ, 7
	k.c.live[7] = cq
	a, err := sys.NewArena(16)
	require.NoError(t, err)
	defer a.Close()
	for i := 0; i < 2; i++ {
		b, _ := a.AllocBuf(8)
		binary.LittleEndian.PutUint64(b.Bytes(), 7)
		require.NoError(t, sys.Write(w, b))
		got, err := ch.GetEvent(context.Background())
		require.NoError(t, err)
		require.Same(t, cq, got)
		require.EqualValues(t, i+1, drv.events.Load(), "the provider saw event %d", i+1)
	}
	require.NoError(t, ch.Close())
}
