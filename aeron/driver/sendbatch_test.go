package driver

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// regMedia opens regTransports: fake transports that register memory
// (MemoryRegistrar) and take at most perSend datagrams per Send.
type regMedia struct {
	mu sync.Mutex
	ts []*regTransport
}

type regTransport struct {
	fakeTransport
	perSend     int
	batches     []int // datagrams offered per Send
	regLen      int
	maxInFlight int
	released    bool
	closedAfter bool // Close came after release
}

func (m *regMedia) Name() string { return "udp" }

func (m *regMedia) Open(_ *uri.ChannelURI, bind, _ netip.AddrPort, _ TransportParams, _ Affinity) (Transport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &regTransport{fakeTransport: fakeTransport{bind: bind}, perSend: 3}
	m.ts = append(m.ts, t)
	return t, nil
}

func (t *regTransport) Send(dest netip.AddrPort, ds [][]byte) (int, error) {
	t.mu.Lock()
	t.batches = append(t.batches, len(ds))
	t.mu.Unlock()
	return t.fakeTransport.Send(dest, ds[:min(len(ds), t.perSend)])
}

func (t *regTransport) RegisterMemory(b []byte, maxInFlight int) (func() error, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.regLen, t.maxInFlight = len(b), maxInFlight
	return func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.released = true
		return nil
	}, nil
}

func (t *regTransport) Close() error {
	t.mu.Lock()
	t.closedAfter = t.released
	t.mu.Unlock()
	return t.fakeTransport.Close()
}

// TestSendBatchAndRegisteredLog: a unicast publication hands its ready
// datagrams to one Send and, when the medium takes fewer (a full send
// queue), sends the rest later, each once and in order; a medium that
// registers memory gets the whole log with a term/16 in-flight bound and
// releases it before the transport closes.
func TestSendBatchAndRegisteredLog(t *testing.T) {
	m := &regMedia{}
	cfg := udpTestConfig(t)
	cfg.PublicationLingerTimeout = 10 * time.Millisecond
	d, err := Start(cfg, WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	pub, err := cl.AddPublication(context.Background(), "aeron:udp?endpoint=10.0.0.2:40123|term-length=64k|mtu=1408|session-id=5|init-term-id=0|term-id=0|term-offset=0", 1001)
	require.NoError(t, err)
	m.mu.Lock()
	require.Len(t, m.ts, 1)
	tr := m.ts[0]
	m.mu.Unlock()
	// the sender registers the log when it takes the publication
	var regLen, maxInFlight int
	for end := time.Now().Add(10 * time.Second); regLen == 0 && time.Now().Before(end); time.Sleep(time.Millisecond) {
		tr.mu.Lock()
		regLen, maxInFlight = tr.regLen, tr.maxInFlight
		tr.mu.Unlock()
	}
	require.Equal(t, 64<<10/16, maxInFlight)
	require.GreaterOrEqual(t, regLen, 3*64<<10, "the whole log is registered")

	// connected with a zero receiver window: 30 messages of 1000 bytes
	// (one 1056-byte frame per datagram) wait in the log, then a window
	// opens and the sender finds them all ready
	from := netip.MustParseAddrPort("10.0.0.9:40456")
	b := make([]byte, 64)
	sm := protocol.StatusMessage{SessionID: 5, StreamID: 1001, ReceiverWindow: 0, ReceiverID: 1}
	n, _ := sm.Encode(b)
	tr.push(from, b[:n])
	end := time.Now().Add(30 * time.Second)
	for !pub.IsConnected() {
		require.False(t, time.Now().After(end), "connected")
		time.Sleep(time.Millisecond)
	}
	msg := make([]byte, 1000)
	for i := 0; i < 30; {
		require.False(t, time.Now().After(end), "offered")
		if pub.Offer(msg) > 0 {
			i++
		}
	}
	sm.ReceiverWindow = 1 << 16
	n, _ = sm.Encode(b)
	tr.push(from, b[:n])
	var offs []int32
	for {
		require.False(t, time.Now().After(end), "30 data frames sent")
		offs = offs[:0]
		for _, dg := range tr.sent() {
			var h protocol.DataHeader
			if h.Decode(dg.b) == nil && h.Type == protocol.TypeData && h.FrameLength > 0 {
				offs = append(offs, h.TermOffset)
			}
		}
		if len(offs) >= 30 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Len(t, offs, 30, "each datagram once")
	for i, off := range offs {
		require.Equal(t, int32(i*1056), off, "datagram %d", i)
	}
	tr.mu.Lock()
	most := 0
	for _, k := range tr.batches {
		most = max(most, k)
	}
	tr.mu.Unlock()
	require.Greater(t, most, 3, "ready datagrams were handed to Send one at a time")

	require.NoError(t, pub.Close())
	for {
		tr.mu.Lock()
		closed, after := tr.closed, tr.closedAfter
		tr.mu.Unlock()
		if closed {
			require.True(t, after, "the transport closed before the log's registration was released")
			break
		}
		require.False(t, time.Now().After(end), "publication freed")
		time.Sleep(time.Millisecond)
	}
}
