//go:build linux

package ib_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/inspect"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/media/udp"
	"github.com/ibgo/ibgo/internal/testutil"
	_ "github.com/ibgo/ibgo/rxe"
)

const deadline = 120 * time.Second

type stream struct {
	pub        *client.Publication
	sub        *client.Subscription
	sent, next int
	size       int
	fh         logbuffer.FragmentHandler
	t          *testing.T
}

func newStream(t *testing.T, c *client.Client, channel string, size int, pubFirst bool) *stream {
	ctx := context.Background()
	s := &stream{t: t, size: size}
	var err error
	if pubFirst {
		// The publication's transport finds nobody answering SIDR and
		// resolves in the background once the subscription exists.
		s.pub, err = c.AddPublication(ctx, channel, 1001)
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond)
	}
	s.sub, err = c.AddSubscription(ctx, channel, 1001)
	require.NoError(t, err)
	if !pubFirst {
		s.pub, err = c.AddPublication(ctx, channel, 1001)
		require.NoError(t, err)
	}
	s.fh = client.NewFragmentAssembler(func(payload []byte, h *logbuffer.Header) {
		require.Len(t, payload, size)
		got := int(binary.LittleEndian.Uint64(payload))
		require.Equal(t, s.next, got, "%s: message out of order or duplicated", channel)
		s.next++
	}).Handler()
	end := time.Now().Add(deadline)
	for !s.pub.IsConnected() || !s.sub.IsConnected() {
		require.False(t, time.Now().After(end), "%s never connected", channel)
		time.Sleep(time.Millisecond)
	}
	return s
}

// step offers one message if any remain and polls the subscription.
func (s *stream) step(n int, msg []byte) {
	if s.sent < n {
		binary.LittleEndian.PutUint64(msg, uint64(s.sent))
		if s.pub.Offer(msg) > 0 {
			s.sent++
		}
	}
	s.sub.Poll(s.fh, 64)
}

// TestIBAndUDPLoopback: one driver serves aeron:ib (UD over rxe, loopback)
// and aeron:udp on the same host:port at the same time; every message of
// both streams arrives once and in order and the error log stays empty.
func TestIBAndUDPLoopback(t *testing.T) {
	vm := testutil.OneNode(t)
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.TermBufferLength = 1 << 20
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	m := ib.New()
	d, err := driver.Start(cfg, driver.WithMedia(udp.New(udp.Loss{})), driver.WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	hp := vm.IP + ":24571"
	ibs := newStream(t, c, "aeron:ib?endpoint="+hp+"|mtu=1024", 256, false)
	udps := newStream(t, c, "aeron:udp?endpoint="+hp+"|mtu=1024", 256, false)

	const nIB, nUDP = 100_000, 20_000
	msg := make([]byte, 256)
	end := time.Now().Add(5 * deadline)
	start := time.Now()
	for ibs.next < nIB || udps.next < nUDP {
		require.False(t, time.Now().After(end), "timed out: ib sent %d got %d, udp sent %d got %d", ibs.sent, ibs.next, udps.sent, udps.next)
		ibs.step(nIB, msg)
		udps.step(nUDP, msg)
	}
	el := time.Since(start)
	t.Logf("ib %d + udp %d messages of 256 B in %v (ib %.0f msg/s alongside udp)", nIB, nUDP, el, float64(nIB)/el.Seconds())
	require.Equal(t, nIB, ibs.next)
	require.Equal(t, nUDP, udps.next)
	require.Zero(t, m.RecvErrors.Load(), "receive completions in error")
	require.Zero(t, m.SendErrors.Load(), "send completions in error")
	require.Zero(t, m.Unresolved.Load(), "datagrams without a peer")
	// the publication's log was registered and its frames left from it
	require.Zero(t, m.RegisterErrors.Load(), "term buffers not registered")
	require.Positive(t, m.ZeroCopy.Load(), "no frame was posted from the term buffer")
	t.Logf("ib datagrams: %d from the term buffer, %d inline, %d copied", m.ZeroCopy.Load(), m.Inline.Load(), m.Copied.Load())

	f, err := cnc.Open(d.Dir())
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	n, err := inspect.Errors(&out, f, time.UTC)
	require.NoError(t, err)
	require.Zero(t, n, "error log: %s", out.String())

	// the medium's statistics are CnC counters (issue 29), which `ibgo
	// aeron stat` lists with the rest
	var stat bytes.Buffer
	require.Eventually(t, func() bool {
		stat.Reset()
		require.NoError(t, inspect.Stat(&stat, f, time.Now(), time.UTC))
		return statValue(stat.String(), "aeron:ib: datagrams sent zero-copy") == m.ZeroCopy.Load()
	}, 5*time.Second, 10*time.Millisecond, "ibgo aeron stat:\n%s", stat.String())
}

// statValue finds the value `ibgo aeron stat` prints for a counter label.
func statValue(out, label string) int64 {
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, label); i >= 0 {
			fs := strings.Fields(line[:i])
			for j := len(fs) - 1; j >= 0; j-- {
				if v, err := strconv.ParseInt(strings.ReplaceAll(fs[j], ",", ""), 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// TestIBPublicationBeforeSubscription: a publication added before any
// subscription answers SIDR connects once the subscription appears.
func TestIBPublicationBeforeSubscription(t *testing.T) {
	vm := testutil.OneNode(t)
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.TermBufferLength = 1 << 20
	cfg.TimerInterval = 50 * time.Millisecond
	m := ib.New()
	d, err := driver.Start(cfg, driver.WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	s := newStream(t, c, "aeron:ib?endpoint="+vm.IP+":24573|mtu=4096", 256, true)
	msg := make([]byte, 256)
	end := time.Now().Add(deadline)
	for s.next < 10_000 {
		require.False(t, time.Now().After(end), "timed out: sent %d got %d", s.sent, s.next)
		s.step(10_000, msg)
	}
	require.Zero(t, m.ResolveErrors.Load())
}

// TestIBMediaTimestamp: with media-rcv-ts-offset=reserved the first
// message of each datagram arrives with the receive time of the datagram
// in its reserved value, over ib-qp=ud and ib-qp=rc. rxe has no completion
// clock (uverbs.Context.CompletionClock refuses): the CQs are made without
// timestamps (no refused CQ, no error) and the times are software ones,
// counted in Media.MediaClock.Software.
func TestIBMediaTimestamp(t *testing.T) {
	vm := testutil.OneNode(t)
	for i, qp := range []string{"ud", "rc"} {
		t.Run(qp, func(t *testing.T) {
			cfg := driver.DefaultConfig()
			cfg.Dir = filepath.Join(t.TempDir(), "aeron")
			cfg.TermBufferLength = 1 << 20
			cfg.TimerInterval = 50 * time.Millisecond
			m := ib.New()
			var reported []error
			var mu sync.Mutex
			m.SetErrorHandler(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
			d, err := driver.Start(cfg, driver.WithMedia(m))
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			c, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })

			start := time.Now().UnixNano()
			ch := fmt.Sprintf("aeron:ib?endpoint=%s:%d|mtu=1024|ib-qp=%s|media-rcv-ts-offset=reserved", vm.IP, 24579+i, qp)
			s := newStream(t, c, ch, 64, false)
			var stamps []int64
			inner := s.fh
			s.fh = func(payload []byte, h *logbuffer.Header) {
				stamps = append(stamps, h.ReservedValue())
				inner(payload, h)
			}
			msg := make([]byte, 64)
			end := time.Now().Add(deadline)
			for s.next < 1000 {
				require.False(t, time.Now().After(end), "timed out: sent %d got %d", s.sent, s.next)
				s.step(1000, msg)
			}
			stop := time.Now().UnixNano()
			require.Len(t, stamps, 1000)
			// the first message of each datagram carries it (as the C driver
			// stamps), the others keep the publisher's reserved value 0
			stamped := 0
			for i, ts := range stamps {
				if ts != 0 {
					stamped++
					require.True(t, ts >= start && ts <= stop, "message %d: media timestamp %d not within the run [%d, %d]", i, ts, start, stop)
				}
			}
			require.NotZero(t, stamped, "no message carries a media receive timestamp")
			t.Logf("%d of 1000 messages first in their datagram and stamped", stamped)
			// the subscription's receive CQ and the publication's (its
			// connection's, for rc) asked and got software time
			require.GreaterOrEqual(t, m.MediaClock.Software.Load(), int64(2), "receive CQs stamping in software")
			require.Zero(t, m.MediaClock.Hardware.Load(), "rxe has no completion clock")
			require.Zero(t, m.MediaClock.Fallbacks.Load())
			mu.Lock()
			require.Empty(t, reported, "a device without a clock is not an error")
			mu.Unlock()
		})
	}
}
