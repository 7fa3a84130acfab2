//go:build linux

package ib_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/internal/testutil"
)

// TestIBUDBurstWideWindow (issue 29): a burst of 20 MB on aeron:ib UD into
// a subscription with rcv-wnd=8m (a 16 MB term): the UD receive ring is
// sized from the window (two buffers per datagram the window holds,
// within the device's limits), so a burst the flow control lets through
// finds buffers posted; the subscriber's driver sends no NAK storm. Every
// message arrives once and in order; the NAK count, the ring posted and
// the datagram count are logged.
func TestIBUDBurstWideWindow(t *testing.T) {
	vm := testutil.OneNode(t)
	big := func(c *driver.Config) { c.TermBufferLength = 16 << 20 }
	dp, _ := startIB(t, big)
	ds, ms := startIB(t, big)
	ch := fmt.Sprintf("aeron:ib?endpoint=%s:24661|mtu=4096|rcv-wnd=8m|term-length=16m", vm.IP)
	ctx := context.Background()
	sub, err := connectTo(t, ds).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	pub, err := connectTo(t, dp).AddPublication(ctx, ch, 1001)
	require.NoError(t, err)
	waitUntil(t, "connected", deadline, func() bool { return pub.IsConnected() && sub.IsConnected() })
	naks := systemCounter(t, ds, "NAKs sent")
	const n, size = 20_000, 1000
	r := newReceiver(sub, 0)
	done := make(chan error, 1)
	go func() { done <- r.until(n, deadline) }()
	offerSized(t, pub, 0, n, size, deadline)
	require.NoError(t, <-done, "every message once and in order")
	sent := systemCounter(t, ds, "NAKs sent") - naks
	t.Logf("burst of %d messages of %d B (rcv-wnd=8m): NAKs sent %d, receive buffers posted %d, datagrams received %d",
		n, size, sent, ms.RingBuffers.Load(), systemCounter(t, ds, "Bytes received")/4096)
	require.GreaterOrEqual(t, ms.RingBuffers.Load(), int64(2*(8<<20)/4096/2), "a ring sized from the window, not from so-rcvbuf")
	require.Less(t, sent, int64(n/100), "no NAK storm: under 1 %% of the messages NAKed")
}
