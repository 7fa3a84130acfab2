package driver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// TestReceiverWindowFromChannel: rcv-wnd sets the window the image's
// status messages announce (at most half a term); later subscriptions on
// the endpoint share the endpoint channel's window.
func TestReceiverWindowFromChannel(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	defer cl.Close()
	sub, err := cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20131|rcv-wnd=8k", 7)
	require.NoError(t, err)
	tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20131"))
	require.NotNil(t, tr)
	from := netip.MustParseAddrPort("127.0.0.1:20132")
	tr.push(from, rawSetup(t, &protocol.Setup{SessionID: 5, StreamID: 7, InitialTermID: 1, ActiveTermID: 1, TermLength: 64 << 10, MTU: 1408}))
	end := time.Now().Add(30 * time.Second)
	for !sub.IsConnected() || len(tr.sent()) == 0 {
		require.False(t, time.Now().After(end), "no image or status message")
		time.Sleep(100 * time.Microsecond)
	}
	var sm protocol.StatusMessage
	require.NoError(t, sm.Decode(tr.sent()[0].b))
	require.Equal(t, int32(8<<10), sm.ReceiverWindow)
}

func TestSocketBufferRules(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()

	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=127.0.0.1:20141|mtu=8k|so-sndbuf=4k", 1)
	require.ErrorContains(t, err, "MTU greater than SO_SNDBUF for channel: mtu=8192 so-sndbuf=4096")
	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=127.0.0.1:20141|mtu=4k|so-sndbuf=4k", 1)
	require.NoError(t, err)

	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142|rcv-wnd=64k|so-rcvbuf=32k", 1)
	require.ErrorContains(t, err, "Initial window greater than SO_SNDBUF for channel: rcv-wnd=65536 so-rcvbuf=32768")
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142|rcv-wnd=32k|so-rcvbuf=64k", 1)
	require.NoError(t, err)
	// the endpoint exists: other buffer lengths are refused, the same or
	// none accepted
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142|so-rcvbuf=128k", 2)
	require.ErrorContains(t, err, "so-rcvbuf=131072 does not match existing value of 65536")
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142|so-sndbuf=128k", 2)
	require.ErrorContains(t, err, "so-sndbuf=131072 does not match existing value of OS default")
	// the window (default 128 KiB) is checked against the new channel's
	// so-rcvbuf too, as in C
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142|so-rcvbuf=64k", 2)
	require.ErrorContains(t, err, "rcv-wnd=131072 so-rcvbuf=65536")
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142|so-rcvbuf=64k|rcv-wnd=64k", 2)
	require.NoError(t, err)
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:20142", 3)
	require.NoError(t, err)
}
