//go:build linux

package ib_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/testutil"
)

// capture is the ib medium keeping the transports it opened.
type capture struct {
	*ib.Media
	mu sync.Mutex
	ts []driver.Transport
}

func (c *capture) Open(ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	tr, err := c.Media.Open(ch, bind, connect, p, aff)
	if err == nil {
		c.mu.Lock()
		c.ts = append(c.ts, tr)
		c.mu.Unlock()
	}
	return tr, err
}

func (c *capture) transports() []driver.Transport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]driver.Transport(nil), c.ts...)
}

func startCapture(t *testing.T) (*driver.Driver, *capture) {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.TermBufferLength = 1 << 20
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	m := &capture{Media: ib.New()}
	d, err := driver.Start(cfg, driver.WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, m
}

// TestIBQPErrorRecovered: mid-stream the subscriber's UD QP, and later the
// publisher's, is moved to the error state (as a local error or a fatal
// asynchronous event does): every posted receive flushes. Each transport
// notices on its next poll, restarts its receive path in place (RESET,
// INIT, RTR, RTS, the ring reposted; same QPN, so peers need nothing),
// reports it to its driver's error log with the cause, and Aeron's NAKs
// and retransmits repair what was lost: every message arrives once and in
// order.
func TestIBQPErrorRecovered(t *testing.T) {
	vm := testutil.OneNode(t)
	dp, mp := startCapture(t)
	ds, ms := startCapture(t)
	ch := "aeron:ib?endpoint=" + vm.IP + ":24591|mtu=1024"
	ctx := context.Background()
	sub, err := connectTo(t, ds).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	pub, err := connectTo(t, dp).AddPublication(ctx, ch, 1001)
	require.NoError(t, err)
	waitUntil(t, "connected", deadline, func() bool { return pub.IsConnected() && sub.IsConnected() })
	require.Len(t, ms.transports(), 1)
	require.Len(t, mp.transports(), 1)

	const n = 30_000
	r := newReceiver(sub, 0)
	done := make(chan error, 1)
	go func() { done <- r.until(n, 5*deadline) }()
	offerAll(t, pub, 0, 10_000, 5*deadline)
	require.NoError(t, ib.ForceQPError(ms.transports()[0]), "subscriber's QP to error")
	offerAll(t, pub, 10_000, 20_000, 5*deadline)
	require.NoError(t, ib.ForceQPError(mp.transports()[0]), "publisher's QP to error")
	offerAll(t, pub, 20_000, n, 5*deadline)
	require.NoError(t, <-done)

	require.Positive(t, ms.QPRestarts.Load(), "the subscriber's receive path was restarted")
	require.Positive(t, mp.QPRestarts.Load(), "the publisher's receive path was restarted")
	for _, d := range []*driver.Driver{ds, dp} {
		log, k := errorLog(t, d)
		require.Equal(t, 1, k, "one distinct error: %s", log)
		require.Contains(t, log, "went to the error state (")
		require.Contains(t, log, "its receive path was restarted")
		require.Positive(t, systemCounter(t, d, "Errors"))
	}
	t.Logf("subscriber: NAKs sent %d; publisher: retransmits sent %d", systemCounter(t, ds, "NAKs sent"), systemCounter(t, dp, "Retransmits sent"))
}
