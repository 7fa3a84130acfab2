package driver

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// FuzzSenderControl feeds arbitrary datagrams to the control socket of a
// multicast publication under tagged flow control with a group minimum
// (the most stateful strategy): status messages with and without group
// tags, NAKs, RTT requests, whatever. Nothing may crash or stop the
// sender agent.
func FuzzSenderControl(f *testing.F) {
	enc := func(m interface{ Encode([]byte) (int, error) }) []byte {
		b := make([]byte, 64)
		n, err := m.Encode(b)
		require.NoError(f, err)
		return b[:n]
	}
	for _, tag := range []bool{false, true} {
		f.Add(enc(&protocol.StatusMessage{SessionID: 1, StreamID: 1001, ReceiverWindow: 1 << 16, ReceiverID: 7, GroupTag: 1, HasGroupTag: tag}))
	}
	f.Add(enc(&protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagEOS}, SessionID: 1, StreamID: 1001}))
	f.Add(enc(&protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagSetup}, SessionID: 1, StreamID: 1001}))
	f.Add(enc(&protocol.Nak{SessionID: 1, StreamID: 1001, TermOffset: 64, Length: 1 << 20}))
	f.Add(enc(&protocol.RTTMeasurement{FrameHeader: protocol.FrameHeader{Flags: protocol.RTTMFlagReply}, SessionID: 1, StreamID: 1001}))
	f.Add([]byte{})
	f.Add(make([]byte, 43))
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(f), WithMedia(m))
	require.NoError(f, err)
	f.Cleanup(func() { d.Close() })
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(f, err)
	f.Cleanup(func() { cl.Close() })
	pub, err := cl.AddPublication(context.Background(), "aeron:udp?endpoint=224.0.1.1:40456|fc=tagged,g:1/2|session-id=1", 1001)
	require.NoError(f, err)
	tr := m.transport(netip.MustParseAddrPort("224.0.1.2:40456")) // the control group
	require.NotNil(f, tr)
	from := netip.MustParseAddrPort("10.0.0.9:40456")
	f.Fuzz(func(t *testing.T, b []byte) {
		tr.push(from, b)
		end := time.Now().Add(20 * time.Second)
		for tr.pending() > 0 {
			if time.Now().After(end) {
				buf := make([]byte, 1<<20)
				t.Fatalf("the sender stopped taking datagrams:\n%s", buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(50 * time.Microsecond)
		}
		select {
		case <-d.Terminated():
			t.Fatal("the driver stopped")
		default:
		}
		_ = pub.IsConnected()
	})
}
