package driver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// TestMaxResendPool: a multicast publication with max-resend=2 resends
// two ranges NAKed at once and counts the third as a pool overflow.
func TestMaxResendPool(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	pub, err := cl.AddPublication(context.Background(), "aeron:udp?endpoint=224.0.1.1:40456|max-resend=2|session-id=5|term-length=64k|init-term-id=0|term-id=0|term-offset=0", 1001)
	require.NoError(t, err)
	tr := m.transport(netip.MustParseAddrPort("224.0.1.2:40456"))
	require.NotNil(t, tr)
	from := netip.MustParseAddrPort("10.0.0.9:40456")
	sm := protocol.StatusMessage{SessionID: 5, StreamID: 1001, ReceiverWindow: 1 << 15, ReceiverID: 1}
	b := make([]byte, 64)
	n, _ := sm.Encode(b)
	tr.push(from, b[:n])
	end := time.Now().Add(30 * time.Second)
	for !pub.IsConnected() {
		require.False(t, time.Now().After(end), "connected")
		time.Sleep(time.Millisecond)
	}
	msg := make([]byte, 1000)
	for i := 0; i < 8; {
		if pub.Offer(msg) > 0 {
			i++
		}
	}
	for d.c.sys[sysBytesSent].Load() < 8*1056 {
		require.False(t, time.Now().After(end), "data sent")
		time.Sleep(time.Millisecond)
	}
	for _, off := range []int32{0, 2048, 4096} {
		nak := protocol.Nak{SessionID: 5, StreamID: 1001, TermID: 0, TermOffset: off, Length: 1024}
		n, _ := nak.Encode(b)
		tr.push(from, b[:n])
	}
	for d.c.sys[sysRetransmitOverflow].Load() < 1 {
		require.False(t, time.Now().After(end), "overflow counted")
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, 2, d.c.sys[sysRetransmitsSent].Load())
	require.EqualValues(t, 1, d.c.sys[sysRetransmitOverflow].Load())
}

// TestNakDelayParam: nak-delay=2s on a unicast subscription holds its NAK
// back; the C driver's default (100 µs) sends it at once.
func TestNakDelayParam(t *testing.T) {
	for _, c := range []struct {
		extra string
		nak   bool
	}{{"|nak-delay=2s", false}, {"", true}} {
		m := &fakeMedia{}
		d, err := Start(udpTestConfig(t), WithMedia(m))
		require.NoError(t, err)
		cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
		require.NoError(t, err)
		sub, err := cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20121"+c.extra, 1001)
		require.NoError(t, err)
		tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20121"))
		from := netip.MustParseAddrPort("127.0.0.1:40000")
		b := make([]byte, 256)
		setup := protocol.Setup{SessionID: 9, StreamID: 1001, TermLength: 64 << 10, MTU: 1408}
		n, _ := setup.Encode(b)
		tr.push(from, b[:n])
		end := time.Now().Add(30 * time.Second)
		for !sub.IsConnected() {
			require.False(t, time.Now().After(end), "image")
			time.Sleep(time.Millisecond)
		}
		// frames at 0 and 128: 64..128 is a gap
		for _, off := range []int32{0, 128} {
			h := protocol.DataHeader{FrameHeader: protocol.FrameHeader{FrameLength: 64, Type: protocol.TypeData, Flags: protocol.FlagsUnfragmented},
				TermOffset: off, SessionID: 9, StreamID: 1001}
			clear(b[:64])
			h.Encode(b)
			tr.push(from, b[:logbuffer.FrameAlignment*2])
		}
		naks := func() int64 { return d.c.sys[sysNaksSent].Load() }
		if c.nak {
			for naks() == 0 {
				require.False(t, time.Now().After(end), "NAK with the default delay")
				time.Sleep(time.Millisecond)
			}
		} else {
			time.Sleep(300 * time.Millisecond)
			require.Zero(t, naks(), "nak-delay=2s holds the NAK back")
		}
		cl.Close()
		d.Close()
	}
}

// TestPublicationsMatchedByEndpoint: non-exclusive network publications of
// a stream are matched by their send endpoint, as the C driver matches
// them, not by the channel string: parameters in another order, or a key
// that does not change the endpoint, give the same session; a log
// parameter that differs is refused, naming it; another endpoint or an
// exclusive publication is a session of its own.
func TestPublicationsMatchedByEndpoint(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	add := func(channel string) *client.Publication {
		p, err := cl.AddPublication(ctx, channel, 7)
		require.NoError(t, err, channel)
		return p
	}
	a := add("aeron:udp?endpoint=127.0.0.1:40470|term-length=64k")
	b := add("aeron:udp?term-length=64k|endpoint=127.0.0.1:40470")
	require.Equal(t, a.SessionID(), b.SessionID(), "reordered parameters: one publication")
	c := add("aeron:udp?endpoint=127.0.0.1:40470|linger=1s")
	require.Equal(t, a.SessionID(), c.SessionID(), "a key that does not change the endpoint or the log")
	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=127.0.0.1:40470|term-length=128k", 7)
	require.ErrorContains(t, err, "existing publication has different 'term-length': existing=65536 requested=131072")
	other := add("aeron:udp?endpoint=127.0.0.1:40471|term-length=64k")
	require.NotEqual(t, a.SessionID(), other.SessionID(), "another endpoint")
	ex, err := cl.AddExclusivePublication(ctx, "aeron:udp?endpoint=127.0.0.1:40470|term-length=64k", 7)
	require.NoError(t, err)
	require.NotEqual(t, a.SessionID(), ex.SessionID(), "an exclusive publication")
}
