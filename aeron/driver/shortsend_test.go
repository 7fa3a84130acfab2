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

// TestShortSendsResumeWhereTheyStopped: a medium that takes one datagram
// per Send (a socket buffer that keeps filling) makes every batched send
// short; the sender counts them and sends the rest on later cycles, so
// the DATA on the wire is contiguous, once each, with nothing skipped.
func TestShortSendsResumeWhereTheyStopped(t *testing.T) {
	m := &fakeMedia{maxPerSend: 1}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	defer cl.Close()
	pub, err := cl.AddPublication(context.Background(), "aeron:udp?endpoint=127.0.0.1:20121|mtu=1408", 1001)
	require.NoError(t, err)
	var tr *fakeTransport
	end := time.Now().Add(30 * time.Second)
	var setup protocol.Setup
	for setup.SessionID == 0 {
		require.False(t, time.Now().After(end), "no SETUP sent")
		if tr == nil {
			m.mu.Lock()
			if len(m.transports) > 0 {
				tr = m.transports[0]
			}
			m.mu.Unlock()
		}
		if tr != nil {
			for _, dg := range tr.sent() {
				if f, err := protocol.NextFrame(dg.b, 0); err == nil && f.Header.Type == protocol.TypeSetup {
					require.NoError(t, setup.Decode(dg.b))
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	// a receiver's SM at the start with a 64 KiB window connects it
	sm := protocol.StatusMessage{SessionID: setup.SessionID, StreamID: 1001, ConsumptionTermID: setup.ActiveTermID,
		ConsumptionTermOffset: setup.TermOffset, ReceiverWindow: 64 << 10, ReceiverID: 1}
	b := make([]byte, protocol.StatusMessageHeaderLength)
	_, err = sm.Encode(b)
	require.NoError(t, err)
	tr.push(netip.MustParseAddrPort("127.0.0.1:20121"), b)
	const n = 200 // 288-byte frames: 4 per datagram, 50 datagrams
	msg := make([]byte, 256)
	for i := 0; i < n; {
		if pub.Offer(msg) > 0 {
			i++
		}
		require.False(t, time.Now().After(end), "offer")
	}
	want := setup.TermOffset + n*288
	for {
		require.False(t, time.Now().After(end), "the sender did not send everything")
		next := setup.TermOffset
		for _, dg := range tr.sent() {
			var h protocol.DataHeader
			if h.Decode(dg.b) != nil || h.Type != protocol.TypeData || h.IsHeartbeat() {
				continue
			}
			require.Equal(t, next, h.TermOffset, "DATA out of order, repeated or skipped")
			next += int32(len(dg.b))
		}
		if next == want {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Positive(t, d.c.sys[sysShortSends].Load(), "short sends counted")
}
