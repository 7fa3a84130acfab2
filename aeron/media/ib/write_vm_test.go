//go:build linux

package ib_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/inspect"
	"github.com/ibgo/ibgo/internal/testutil"
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
	_ = context.Background
	_ = time.Second
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
