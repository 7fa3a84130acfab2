package driver

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/shm"
)

// grantMedia is fakeMedia whose transports grant images (ImageGranter)
// and deliver frames "placed" in a granted image's terms, as aeron:ib's
// ib-mode=write does.
type grantMedia struct {
	fakeMedia
	mu      sync.Mutex
	grants  []ImageGrant
	revoked int
	placed  [][]byte
}

type grantTransport struct {
	*fakeTransport
	m *grantMedia
}

func (m *grantMedia) Open(ch *uri.ChannelURI, bind, connect netip.AddrPort, p TransportParams, a Affinity) (Transport, error) {
	t, err := m.fakeMedia.Open(ch, bind, connect, p, a)
	if err != nil {
		return nil, err
	}
	return &grantTransport{fakeTransport: t.(*fakeTransport), m: m}, nil
}

func (t *grantTransport) GrantImage(g ImageGrant) (func(), bool) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	t.m.grants = append(t.m.grants, g)
	return func() {
		t.m.mu.Lock()
		t.m.revoked++
		t.m.mu.Unlock()
	}, true
}

func (t *grantTransport) Recv(max int, fn RecvFunc) (int, error) {
	n, err := t.fakeTransport.Recv(max, fn)
	t.m.mu.Lock()
	p := t.m.placed
	t.m.placed = nil
	t.m.mu.Unlock()
	for _, b := range p {
		fn(t, b, netip.MustParseAddrPort("127.0.0.1:40000"), 0)
	}
	return n + len(p), err
}

// TestImageGranted: the receiver grants a new image's three terms (and
// nothing past them) to a transport that implements ImageGranter, at the
// image's join position; frames the peer placed there are handed up as a
// slice of the term and reach the subscriber without a copy or a flow
// control under-run (a subscriber may read them before the receiver
// accounts for them); the grant is revoked when the image goes.
func TestImageGranted(t *testing.T) {
	m := &grantMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	sub, err := cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20131", 1001)
	require.NoError(t, err)
	tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20131"))
	require.NotNil(t, tr)
	const tl = 64 << 10
	tr.push(netip.MustParseAddrPort("127.0.0.1:40000"), rawSetup(t, &protocol.Setup{SessionID: 7, StreamID: 1001,
		InitialTermID: 3, ActiveTermID: 4, TermOffset: 1024, TermLength: tl, MTU: 1408}))
	var g ImageGrant
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.grants) > 0 {
			g = m.grants[0]
		}
		return len(m.grants) == 1
	}, 10*time.Second, time.Millisecond)
	require.Len(t, g.Terms, 3*tl, "the three terms, nothing else")
	require.Equal(t, int64(tl+1024), g.Position, "the join position")
	require.Equal(t, int32(3), g.InitialTermID)
	require.Equal(t, g.Position, g.Rebuilt())

	// two frames placed at the join position (term 4 is the second term)
	term := g.Terms[tl : 2*tl]
	off := 1024
	for _, msg := range []string{"placed one", "placed two"} {
		h := term[off : off+protocol.DataHeaderLength]
		h[5] = protocol.FlagsUnfragmented
		binary.LittleEndian.PutUint16(h[6:], uint16(protocol.TypeData))
		binary.LittleEndian.PutUint32(h[8:], uint32(off))
		binary.LittleEndian.PutUint32(h[12:], 7)
		binary.LittleEndian.PutUint32(h[16:], 1001)
		binary.LittleEndian.PutUint32(h[20:], 4)
		copy(term[off+protocol.DataHeaderLength:], msg)
		shm.StoreInt32(term, off, int32(protocol.DataHeaderLength+len(msg)))
		off += protocol.Align(protocol.DataHeaderLength+len(msg), logbuffer.FrameAlignment)
	}
	m.mu.Lock()
	m.placed = append(m.placed, term[1024:off])
	m.mu.Unlock()
	var got []string
	require.Eventually(t, func() bool {
		sub.Poll(func(p []byte, _ *logbuffer.Header) { got = append(got, string(p)) }, 10)
		return len(got) == 2
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"placed one", "placed two"}, got)
	require.Eventually(t, func() bool { return g.Rebuilt() == int64(tl+off) }, 10*time.Second, time.Millisecond, "rcv-pos past the placed frames")
	require.Zero(t, d.c.sys[sysFlowControlUnderRuns].Load())

	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.revoked == 1
	}, 10*time.Second, time.Millisecond, "the grant revoked with the image")
}
