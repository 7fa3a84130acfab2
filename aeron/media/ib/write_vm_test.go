//go:build linux

package ib_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/inspect"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// TestIBRCWrite (issue 31): ib-mode=write between two drivers in one
// guest. 64 KiB terms rotate hundreds of times; messages of one frame
// and messages fragmented over several arrive once and in order; the
// receiving driver took its data frames from write immediates (placed,
// not copied), and the publication wrote them with RDMA WRITE.
func TestIBRCWrite(t *testing.T) {
	vm := testutil.OneNode(t)
	for i, size := range []int{200, 7_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ch := fmt.Sprintf("aeron:ib?endpoint=%s:%d|ib-qp=rc|ib-mode=write|mtu=4096|term-length=64k", vm.IP, 24731+i)
			n := 100_000
			if size > 4096 {
				n = 10_000 // two fragments each (the largest message is term/8)
			}
			s := startStream(t, ch, n, 20*time.Second)
			t.Cleanup(func() {
				s.logEnd(t, "write")
				logWriteCounters(t, s)
			})
			offerSized(t, s.pub, 0, n, size, 20*time.Second)
			require.NoError(t, <-s.done, "every message once and in order")
			mp, ms := s.mp, s.ms
			frames := int64(n)
			if size > 4096 {
				frames = int64(n * ((size + 4063) / 4064))
			}
			require.GreaterOrEqual(t, ms.RC.PlacedFrames.Load(), frames, "every data frame placed by the publisher's writes")
			require.Equal(t, int64(1), ms.RC.GrantsIssued.Load())
			require.Zero(t, ms.RC.BadPlacements.Load())
			require.Equal(t, ms.RC.Immediates.Load(), mp.RC.Writes.Load(), "one immediate per write")
			requireNoErrorLog(t, s.dp)
			requireNoErrorLog(t, s.ds)
		})
	}
}

// logWriteCounters logs the write-mode counters of a stream's media and
// the drivers' loss and flow-control counters.
func logWriteCounters(t *testing.T, s *ibStream) {
	mp, ms := s.mp, s.ms
	t.Logf("publisher: writes %d (%d bytes), rewritten %d bytes, skipped %d, dropped %d; subscriber: immediates %d, frames placed %d (%d bytes), refused %d, grants %d/%d/%d",
		mp.RC.Writes.Load(), mp.RC.WriteBytes.Load(), mp.RC.Rewritten.Load(), mp.RC.WriteSkipped.Load(), mp.RC.Dropped.Load(),
		ms.RC.Immediates.Load(), ms.RC.PlacedFrames.Load(), ms.RC.PlacedBytes.Load(), ms.RC.BadPlacements.Load(),
		ms.RC.GrantsIssued.Load(), ms.RC.GrantsRevoked.Load(), ms.RC.GrantsDenied.Load())
	for _, l := range []string{"NAKs sent", "NAKs received", "Retransmits sent", "Flow control over runs", "Flow control under runs", "Invalid packets", "Heartbeats received", "Status Messages sent", "Sender flow control limits"} {
		t.Logf("  %s: subscriber %d, publisher %d", l, systemCounter(t, s.ds, l), systemCounter(t, s.dp, l))
	}
	t.Logf("  received %d", s.r.count())
	if t.Failed() {
		for _, d := range []*driver.Driver{s.dp, s.ds} {
			f, err := cnc.Open(d.Dir())
			require.NoError(t, err)
			var out bytes.Buffer
			_ = inspect.Stat(&out, f, time.Now(), time.UTC)
			f.Close()
			t.Logf("counters:\n%s", out.String())
		}
	}
}

// TestIBRCWriteOutsideGrant (issue 31): a peer that was granted an image
// can write nothing outside its terms. A hand-made peer connects as an
// ib-mode=write publication, sends a SETUP and takes the grant; a write
// inside the terms lands (the grant's address is right), a write to the
// bytes right after them (the log's metadata) fails on the peer's QP
// with a remote access error and leaves them as they were; the
// subscriber's driver logs the lost connection and goes on: a real
// publication on the channel then delivers every message in order.
func TestIBRCWriteOutsideGrant(t *testing.T) {
	vm := testutil.OneNode(t)
	const port, mtu = 24741, 1408
	ch := fmt.Sprintf("aeron:ib?endpoint=%s:%d|ib-qp=rc|ib-mode=write|mtu=%d|term-length=64k", vm.IP, port, mtu)
	ctx := context.Background()
	ds, ms := startIB(t, nil)
	sub, err := connectTo(t, ds).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)

	var mem *uverbs.Memory
	var mr *uverbs.MR
	const slots, slot = 16, 4096
	d := cm.Dialer{Param: &cm.ConnParam{PrivateData: ib.WriteConnectData(mtu), RetryCount: 7, RNRRetryCount: 7},
		BeforeConnect: func(cn *cm.Conn) error {
			var err error
			if mem, err = uverbs.AllocMemory((slots+2)*slot, uverbs.MemoryOptions{}); err != nil {
				return err
			}
			if mr, err = cn.PD().RegMR(mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
				return err
			}
			for i := 0; i < slots; i++ {
				if _, err := cn.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{mr.SGE(i*slot, slot)}}}); err != nil {
					return err
				}
			}
			return nil
		}}
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cn, err := d.Dial(dctx, cm.IPAddr(netip.MustParseAddrPort(fmt.Sprintf("%s:%d", vm.IP, port))))
	require.NoError(t, err)
	t.Cleanup(func() { cn.Close(); mr.Close(); mem.Close() })
	out := mem.Bytes()[slots*slot:]
	setup := protocol.Setup{FrameHeader: protocol.FrameHeader{Type: protocol.TypeSetup}, SessionID: 77, StreamID: 1001,
		InitialTermID: 5, ActiveTermID: 5, TermLength: 64 << 10, MTU: mtu}
	n, err := setup.Encode(out)
	require.NoError(t, err)
	post := func(wr uverbs.SendWR) uverbs.WC {
		wr.Flags |= uverbs.SendSignaled
		_, err := cn.QP().PostSend([]uverbs.SendWR{wr})
		require.NoError(t, err)
		var wcs [4]uverbs.WC
		end := time.Now().Add(deadline)
		for time.Now().Before(end) {
			k, err := cn.SendCQ().Poll(wcs[:])
			require.NoError(t, err)
			for _, w := range wcs[:k] {
				if w.Opcode != uverbs.WCRecv && w.Opcode != uverbs.WCRecvRDMAWithImm {
					return w
				}
			}
		}
		t.Fatal("no send completion")
		return uverbs.WC{}
	}
	w := post(uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{mr.SGE(slots*slot, n)}})
	require.Equal(t, uverbs.WCSuccess, w.Status)

	// the grant comes back on the connection (before the status message)
	var addr uint64
	var rkey uint32
	var tl int32
	var wcs [4]uverbs.WC
	end := time.Now().Add(deadline)
	for addr == 0 && time.Now().Before(end) {
		k, err := cn.RecvCQ().Poll(wcs[:])
		require.NoError(t, err)
		for _, w := range wcs[:k] {
			if w.Opcode == uverbs.WCRecv && w.Status == uverbs.WCSuccess {
				b := mem.Bytes()[int(w.WRID)*slot : int(w.WRID)*slot+int(w.ByteLen)]
				if a, r, l, _, ok := ib.ParseGrant(b); ok {
					addr, rkey, tl = a, r, l
				}
			}
		}
	}
	require.NotZero(t, addr, "a grant for the image the SETUP made")
	require.Equal(t, int32(64<<10), tl)
	logs, err := filepath.Glob(filepath.Join(ds.Dir(), "images", "*.logbuffer"))
	require.NoError(t, err)
	require.Len(t, logs, 1)
	read := func(off, n int) []byte {
		b, err := os.ReadFile(logs[0])
		require.NoError(t, err)
		return b[off : off+n]
	}

	// inside the terms: lands (nothing announces it, so the image never
	// takes it as frames)
	pattern := mem.Bytes()[slots*slot+1024 : slots*slot+1088]
	for i := range pattern {
		pattern[i] = 0xAB
	}
	const inside = 40_000
	w = post(uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{mr.SGE(slots*slot+1024, 64)}, RemoteAddr: addr + inside, RKey: rkey})
	require.Equal(t, uverbs.WCSuccess, w.Status, "a write inside the granted terms")
	require.Equal(t, pattern, read(inside, 64))

	// right after the terms: the log's metadata
	meta := 3 * int(tl)
	before := read(meta, 64)
	for i := range pattern {
		pattern[i] = 0xEE
	}
	w = post(uverbs.SendWR{WRID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{mr.SGE(slots*slot+1024, 64)}, RemoteAddr: addr + uint64(meta), RKey: rkey})
	t.Logf("a write to the log's metadata completed %v", w.Status)
	require.Equal(t, uverbs.WCRemAccessErr, w.Status, "a write outside the granted terms")
	require.Equal(t, before, read(meta, 64), "the metadata untouched")
	waitUntil(t, "the subscriber drops the connection", deadline, func() bool { return ms.RC.Lost.Load()+ms.RC.Disconnected.Load() > 0 })
	waitUntil(t, "the grant revoked", deadline, func() bool { return ms.RC.GrantsRevoked.Load() > 0 })
	logText, _ := errorLog(t, ds)
	t.Logf("subscriber error log:\n%s", logText)

	// the subscriber's driver goes on
	dp, _ := startIB(t, nil)
	pub, err := connectTo(t, dp).AddPublication(ctx, ch, 1001)
	require.NoError(t, err)
	r := newReceiver(sub, -1)
	waitUntil(t, "a real publication connects", deadline, pub.IsConnected)
	done := make(chan error, 1)
	go func() { done <- r.until(20_000, deadline) }()
	offerAll(t, pub, 0, 20_000, deadline)
	require.NoError(t, <-done)
}

// TestIBRCWriteRestarts (issue 31): ib-mode=write across restarts in one
// guest. The subscriber's driver goes and a new one subscribes while the
// publication keeps offering: the new image is granted on the new
// connection and delivery resumes in order after what the first one had.
// The publisher's driver goes and a new one publishes: the old grant is
// revoked with its connection, the new session's image is granted, and
// every message of it arrives in order.
func TestIBRCWriteRestarts(t *testing.T) {
	vm := testutil.OneNode(t)
	ctx := context.Background()
	const each = 20_000
	t.Run("subscriber", func(t *testing.T) {
		ch := fmt.Sprintf("aeron:ib?endpoint=%s:24745|ib-qp=rc|ib-mode=write|mtu=4096|term-length=64k", vm.IP)
		dp, mp := startIB(t, nil)
		ds1, _ := startIB(t, nil)
		sub1, err := connectTo(t, ds1).AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		pub, err := connectTo(t, dp).AddPublication(ctx, ch, 1001)
		require.NoError(t, err)
		waitUntil(t, "connected", deadline, pub.IsConnected)
		stop := make(chan struct{})
		offered := make(chan int, 1)
		go func() {
			msg := make([]byte, 256)
			i := 0
			defer func() { offered <- i }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				putSeq(msg, i)
				if pub.Offer(msg) > 0 {
					i++
				} else {
					time.Sleep(50 * time.Microsecond)
				}
			}
		}()
		defer func() { close(stop); <-offered }()
		r1 := newReceiver(sub1, 0)
		require.NoError(t, r1.until(each, deadline))
		require.NoError(t, ds1.Close(), "the first subscriber driver goes")
		ds2, ms2 := startIB(t, nil)
		sub2, err := connectTo(t, ds2).AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		r2 := newReceiver(sub2, -1)
		require.NoError(t, r2.until(each, 2*deadline), "after the restart")
		t.Logf("first driver got 0..%d; the restarted one joined at %d and got %d more in order; publisher: writes %d, rewritten %d bytes, dropped %d; new subscriber: grants %d, frames placed %d",
			r1.next-1, r2.first, r2.count(), mp.RC.Writes.Load(), mp.RC.Rewritten.Load(), mp.RC.Dropped.Load(), ms2.RC.GrantsIssued.Load(), ms2.RC.PlacedFrames.Load())
		require.GreaterOrEqual(t, r2.first, r1.next, "the new image joined after what the first one had")
		require.Positive(t, ms2.RC.GrantsIssued.Load())
		require.GreaterOrEqual(t, ms2.RC.PlacedFrames.Load(), int64(each), "the new image's frames were placed")
	})
	t.Run("publisher", func(t *testing.T) {
		ch := fmt.Sprintf("aeron:ib?endpoint=%s:24746|ib-qp=rc|ib-mode=write|mtu=4096|term-length=64k", vm.IP)
		ds, ms := startIB(t, nil)
		sub, err := connectTo(t, ds).AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		dp1, _ := startIB(t, nil)
		pub1, err := connectTo(t, dp1).AddPublication(ctx, ch, 1001)
		require.NoError(t, err)
		waitUntil(t, "connected", deadline, pub1.IsConnected)
		r := newReceiver(sub, 0)
		done := make(chan error, 1)
		go func() { done <- r.until(each, deadline) }()
		offerAll(t, pub1, 0, each, deadline)
		require.NoError(t, <-done)
		require.NoError(t, dp1.Close(), "the first publisher driver goes")
		waitUntil(t, "the grant revoked with the connection", deadline, func() bool { return ms.RC.GrantsRevoked.Load() > 0 })
		dp2, _ := startIB(t, nil)
		pub2, err := connectTo(t, dp2).AddPublication(ctx, ch, 1001)
		require.NoError(t, err)
		waitUntil(t, "the new publication connects", deadline, pub2.IsConnected)
		r2 := newReceiver(sub, 0)
		go func() { done <- r2.until(each, deadline) }()
		offerAll(t, pub2, 0, each, deadline)
		require.NoError(t, <-done, "the new session's messages once and in order")
		t.Logf("subscriber: grants issued %d, revoked %d; frames placed %d", ms.RC.GrantsIssued.Load(), ms.RC.GrantsRevoked.Load(), ms.RC.PlacedFrames.Load())
		require.GreaterOrEqual(t, ms.RC.GrantsIssued.Load(), int64(2))
		require.GreaterOrEqual(t, ms.RC.PlacedFrames.Load(), int64(2*each))
	})
}
