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

	"github.com/ibgo/ibgo/aeron/client"
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
	return c.OpenContext(context.Background(), ch, bind, connect, p, aff)
}

// OpenContext is what the driver calls for a publication's endpoint
// (driver.BackgroundOpener).
func (c *capture) OpenContext(ctx context.Context, ch *uri.ChannelURI, bind, connect netip.AddrPort, p driver.TransportParams, aff driver.Affinity) (driver.Transport, error) {
	tr, err := c.Media.OpenContext(ctx, ch, bind, connect, p, aff)
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

// capturedPair is a subscription and a publication on one channel, each in
// its own driver whose ib medium keeps the transports it opened.
type capturedPair struct {
	dp, ds *driver.Driver
	mp, ms *capture
	pub    *client.Publication
	sub    *client.Subscription
}

// startCapturedPair starts the publisher's and the subscriber's drivers,
// adds the subscription and then the publication on ch (stream 1001), and
// waits until both are connected, through one transport each.
func startCapturedPair(t *testing.T, ch string) *capturedPair {
	p := &capturedPair{}
	p.dp, p.mp = startCapture(t)
	p.ds, p.ms = startCapture(t)
	ctx := context.Background()
	var err error
	p.sub, err = connectTo(t, p.ds).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	p.pub, err = connectTo(t, p.dp).AddPublication(ctx, ch, 1001)
	require.NoError(t, err)
	waitUntil(t, "connected", deadline, func() bool { return p.pub.IsConnected() && p.sub.IsConnected() })
	require.Len(t, p.ms.transports(), 1)
	require.Len(t, p.mp.transports(), 1)
	return p
}

// streamWithFaults offers 30,000 messages in three thirds through offer,
// with subFault run after the first third and pubFault after the second,
// and requires every message to arrive once and in order.
func (p *capturedPair) streamWithFaults(t *testing.T, offer func(from, to int), subFault, pubFault func()) {
	const n = 30_000
	r := newReceiver(p.sub, 0)
	done := make(chan error, 1)
	go func() { done <- r.until(n, 5*deadline) }()
	offer(0, n/3)
	subFault()
	offer(n/3, 2*n/3)
	pubFault()
	offer(2*n/3, n)
	require.NoError(t, <-done)
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
	p := startCapturedPair(t, "aeron:ib?endpoint="+vm.IP+":24591|mtu=1024")
	p.streamWithFaults(t,
		func(from, to int) { offerAll(t, p.pub, from, to, 5*deadline) },
		func() { require.NoError(t, ib.ForceQPError(p.ms.transports()[0]), "subscriber's QP to error") },
		func() { require.NoError(t, ib.ForceQPError(p.mp.transports()[0]), "publisher's QP to error") })

	require.Positive(t, p.ms.QPRestarts.Load(), "the subscriber's receive path was restarted")
	require.Positive(t, p.mp.QPRestarts.Load(), "the publisher's receive path was restarted")
	for _, d := range []*driver.Driver{p.ds, p.dp} {
		log, k := errorLog(t, d)
		require.Equal(t, 1, k, "one distinct error: %s", log)
		require.Contains(t, log, "went to the error state (")
		require.Contains(t, log, "its receive path was restarted")
		require.Positive(t, systemCounter(t, d, "Errors"))
	}
	t.Logf("subscriber: NAKs sent %d; publisher: retransmits sent %d", systemCounter(t, p.ds, "NAKs sent"), systemCounter(t, p.dp, "Retransmits sent"))
}
