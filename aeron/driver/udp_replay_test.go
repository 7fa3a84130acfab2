package driver

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/pcap"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// fakeMedia is a "udp" medium without sockets: tests push datagrams into
// its transports and read what the driver sent.
type fakeMedia struct {
	mu         sync.Mutex
	transports []*fakeTransport
	maxPerSend int // > 0: Send takes at most this many datagrams (a short send)
}

type fakeDatagram struct {
	addr netip.AddrPort
	b    []byte
}

type fakeTransport struct {
	bind       netip.AddrPort
	maxPerSend int
	mu         sync.Mutex
	in         []fakeDatagram
	out        []fakeDatagram
	closed     bool
	reconnects []netip.AddrPort
}

func (m *fakeMedia) Name() string { return "udp" }

func (m *fakeMedia) Open(_ *uri.ChannelURI, bind, _ netip.AddrPort, _ TransportParams, _ Affinity) (Transport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &fakeTransport{bind: bind, maxPerSend: m.maxPerSend}
	m.transports = append(m.transports, t)
	return t, nil
}

func (m *fakeMedia) transport(bind netip.AddrPort) *fakeTransport {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.transports {
		if t.bind == bind {
			return t
		}
	}
	return nil
}

func (t *fakeTransport) push(from netip.AddrPort, b []byte) {
	t.mu.Lock()
	t.in = append(t.in, fakeDatagram{from, bytes.Clone(b)})
	t.mu.Unlock()
}

func (t *fakeTransport) sent() []fakeDatagram {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]fakeDatagram(nil), t.out...)
}

func (t *fakeTransport) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.in)
}

func (t *fakeTransport) Send(dest netip.AddrPort, ds [][]byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.maxPerSend > 0 && len(ds) > t.maxPerSend {
		ds = ds[:t.maxPerSend]
	}
	for _, d := range ds {
		t.out = append(t.out, fakeDatagram{dest, bytes.Clone(d)})
	}
	return len(ds), nil
}

func (t *fakeTransport) Recv(max int, fn RecvFunc) (int, error) {
	t.mu.Lock()
	n := min(max, len(t.in))
	batch := append([]fakeDatagram(nil), t.in[:n]...)
	t.in = t.in[n:]
	t.mu.Unlock()
	for _, d := range batch {
		fn(t, d.b, d.addr, 0)
	}
	return n, nil
}

func (t *fakeTransport) Reconnect(to netip.AddrPort) error {
	t.mu.Lock()
	t.reconnects = append(t.reconnects, to)
	t.mu.Unlock()
	return nil
}
func (t *fakeTransport) SocketRcvbuf() (int, error) { return 0, nil }
func (t *fakeTransport) LocalAddr() string          { return t.bind.String() }
func (t *fakeTransport) Binding() string            { return "fake" }
func (t *fakeTransport) Close() error               { t.mu.Lock(); t.closed = true; t.mu.Unlock(); return nil }

func udpTestConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.CounterValuesLength = 64 << 10
	cfg.ToDriverBufferLength = 64<<10 + 768
	cfg.ToClientsBufferLen = 64<<10 + 128
	cfg.ErrorBufferLength = 64 << 10
	cfg.LossReportLength = 64 << 10
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.ConductorIdle = "sleep-ns,50000"
	return cfg
}

type capturedData struct {
	from       netip.AddrPort
	b          []byte
	pos, end   int64
	termID     int32
	termOffset int32
	frames     []int64 // positions of the DATA frames with a payload
}

// TestReplayCDriverCapture feeds the C driver's sender traffic from
// udp-loss-cubic.pcap (SETUP, DATA, PAD, heartbeats, retransmissions, RTTM)
// into the ibgo receiver through a socketless medium, withholding a few DATA
// datagrams. The receiver must answer the SETUP with a status message at
// the join position, NAK exactly each withheld range, and, once those are
// "retransmitted", hand every frame of the stream to the subscriber once
// and in order.
func TestReplayCDriverCapture(t *testing.T) {
	raw := testvec.MustBytes(testvec.LossCubicPcap)
	r, err := pcap.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	var dec pcap.Decoder
	var setup protocol.Setup
	var setupFrom netip.AddrPort
	var data []capturedData
	for n := 0; n < 1500; n++ { // the first part of the run is contiguous
		p, err := r.Next()
		require.NoError(t, err)
		dg, kind, err := dec.Datagram(&p)
		require.NoError(t, err)
		if kind != pcap.KindUDP || dg.Dst.Port() != 20121 {
			continue
		}
		f, err := protocol.NextFrame(dg.Payload, 0)
		require.NoError(t, err)
		switch f.Header.Type {
		case protocol.TypeSetup:
			if !setupFrom.IsValid() {
				require.NoError(t, setup.Decode(dg.Payload))
				setupFrom = dg.Src
			}
		case protocol.TypeData, protocol.TypePad:
			data = append(data, capturedData{from: dg.Src, b: bytes.Clone(dg.Payload)})
		}
	}
	require.True(t, setupFrom.IsValid(), "the capture starts with a SETUP")
	shift := logbuffer.PositionBitsToShift(setup.TermLength)
	join := logbuffer.ComputePosition(setup.ActiveTermID, setup.TermOffset, shift, setup.InitialTermID)
	frames := map[int64]bool{}
	maxEnd := join
	for i := range data {
		d := &data[i]
		var h protocol.DataHeader
		require.NoError(t, h.Decode(d.b))
		d.termID, d.termOffset = h.TermID, h.TermOffset
		d.pos = logbuffer.ComputePosition(h.TermID, h.TermOffset, shift, setup.InitialTermID)
		d.end = d.pos
		for off := 0; off < len(d.b); {
			f, err := protocol.NextFrame(d.b, off)
			require.NoError(t, err)
			fl := int64(f.Header.FrameLength)
			if f.Header.Type == protocol.TypeData && fl > protocol.DataHeaderLength {
				d.frames = append(d.frames, d.pos+int64(off))
				frames[d.pos+int64(off)] = true
			}
			if f.Header.Type == protocol.TypePad {
				d.end = d.pos + int64(off) + int64(protocol.Align(int(fl), 32))
			} else {
				d.end = d.pos + int64(protocol.Align(off+int(fl), 32))
			}
			if fl == 0 {
				break
			}
			off = f.Next
		}
		maxEnd = max(maxEnd, d.end)
	}
	require.Greater(t, len(frames), 1000, "the capture carries the stream")

	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	defer cl.Close()
	sub, err := cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20121", setup.StreamID)
	require.NoError(t, err)
	tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20121"))
	require.NotNil(t, tr, "the subscription bound its endpoint")

	deadline := time.Now().Add(60 * time.Second)
	var img *client.Image
	var got []int64
	var withheld []capturedData
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Now().After(deadline) {
				types := map[byte]int{}
				for _, s := range tr.sent() {
					types[s.b[6]]++
				}
				t.Fatalf("timed out waiting for %s: position %d, withheld %d (first at %d), sent by type %v, got %d of %d frames",
					what, img.Position(), len(withheld), firstPos(withheld), types, len(got), len(frames))
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	tr.push(setupFrom, rawSetup(t, &setup))
	wait("image", sub.IsConnected)
	img = sub.Images()[0]
	require.Equal(t, join, img.JoinPosition())
	require.Equal(t, setupFrom.String(), img.SourceIdentity())
	var sm protocol.StatusMessage
	wait("first status message", func() bool { return len(tr.sent()) > 0 })
	first := tr.sent()[0]
	require.Equal(t, setupFrom, first.addr, "SMs go to the sender's address")
	require.NoError(t, sm.Decode(first.b))
	require.Equal(t, setup.SessionID, sm.SessionID)
	require.Equal(t, join, logbuffer.ComputePosition(sm.ConsumptionTermID, sm.ConsumptionTermOffset, shift, setup.InitialTermID))
	require.Equal(t, min(setup.TermLength/2, 128<<10), sm.ReceiverWindow)

	poll := func() {
		sub.Poll(func(_ []byte, h *logbuffer.Header) {
			got = append(got, h.Position()-int64(protocol.Align(int(h.FrameLength()), 32)))
		}, 64)
	}
	window := int64(setup.TermLength / 2)
	naked := func(w capturedData) bool {
		for _, s := range tr.sent() {
			var nak protocol.Nak
			if s.b[6] == byte(protocol.TypeNak) && nak.Decode(s.b) == nil && nak.TermID == w.termID &&
				nak.TermOffset <= w.termOffset && w.termOffset < nak.TermOffset+nak.Length {
				require.Equal(t, setup.SessionID, nak.SessionID)
				require.Equal(t, setupFrom, s.addr, "NAKs go to the sender's address")
				require.Zero(t, nak.TermOffset%32)
				return true
			}
		}
		return false
	}
	// A withheld datagram is resolved when the receiver NAKs its range
	// (it is then "retransmitted") or when the C sender's own
	// retransmissions in the capture fill it first.
	retransmitted := 0
	resolve := func() {
		for len(withheld) > 0 {
			w := withheld[0]
			switch {
			case img.Position() >= w.end:
			case naked(w):
				tr.push(w.from, w.b)
				retransmitted++
			default:
				return
			}
			withheld = withheld[1:]
		}
	}
	lastSMPosition := func() int64 {
		pos := join
		for _, s := range tr.sent() {
			var sm protocol.StatusMessage
			if s.b[6] == byte(protocol.TypeStatusMessage) && sm.Decode(s.b) == nil && sm.Flags == 0 {
				pos = max(pos, logbuffer.ComputePosition(sm.ConsumptionTermID, sm.ConsumptionTermOffset, shift, setup.InitialTermID))
			}
		}
		return pos
	}
	seen := map[int64]bool{}
	for i, dd := range data {
		// Withhold the first copy of every 97th datagram: a loss the
		// receiver must find and NAK.
		if i%97 == 50 && !seen[dd.pos] && len(dd.frames) > 0 {
			seen[dd.pos] = true
			withheld = append(withheld, dd)
			continue
		}
		seen[dd.pos] = true
		// Like a real sender, stay within the window of the last status
		// message: the receiver and the conductor that schedules SMs run
		// apart, so the subscriber's own position may be ahead of it.
		wait("room in the window", func() bool {
			poll()
			resolve()
			return dd.end <= lastSMPosition()+window
		})
		tr.push(dd.from, dd.b)
	}
	wait("the whole stream", func() bool {
		poll()
		resolve()
		return len(got) >= len(frames) && tr.pending() == 0
	})
	require.Len(t, got, len(frames), "every frame once")
	for i := 1; i < len(got); i++ {
		require.Greater(t, got[i], got[i-1], "in order")
	}
	for _, p := range got {
		require.True(t, frames[p], "frame at %d was sent", p)
	}
	require.Equal(t, maxEnd, img.Position())
	require.Empty(t, withheld)
	require.Positive(t, retransmitted, "at least one withheld range was recovered through a NAK")
	t.Logf("%d frames, %d datagrams withheld and recovered through NAKs", len(got), retransmitted)
}

func rawSetup(t *testing.T, s *protocol.Setup) []byte {
	b := make([]byte, protocol.SetupHeaderLength)
	_, err := s.Encode(b)
	require.NoError(t, err)
	return b
}

func firstPos(w []capturedData) int64 {
	if len(w) == 0 {
		return -1
	}
	return w[0].pos
}

// FuzzReceiveDatagram: whatever arrives on a receive endpoint is dropped
// and counted or handled, never a crash; the seeds are the capture's first
// datagrams (SETUP first, so an image exists and DATA reaches the
// rebuilder).
func FuzzReceiveDatagram(f *testing.F) {
	r, err := pcap.NewReader(bytes.NewReader(testvec.MustBytes(testvec.LossCubicPcap)))
	require.NoError(f, err)
	var dec pcap.Decoder
	var setup []byte
	for n := 0; n < 40; n++ {
		p, err := r.Next()
		require.NoError(f, err)
		dg, kind, err := dec.Datagram(&p)
		if err != nil || kind != pcap.KindUDP {
			continue
		}
		if setup == nil && len(dg.Payload) == protocol.SetupHeaderLength {
			setup = bytes.Clone(dg.Payload)
		}
		f.Add(bytes.Clone(dg.Payload))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 7))
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(f), WithMedia(m))
	require.NoError(f, err)
	f.Cleanup(func() { d.Close() })
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(f, err)
	f.Cleanup(func() { cl.Close() })
	_, err = cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20121", 1001)
	require.NoError(f, err)
	tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20121"))
	require.NotNil(f, tr)
	from := netip.MustParseAddrPort("127.0.0.1:40000")
	tr.push(from, setup)
	f.Fuzz(func(t *testing.T, b []byte) {
		tr.push(from, b)
		end := time.Now().Add(20 * time.Second)
		for tr.pending() > 0 {
			if time.Now().After(end) {
				buf := make([]byte, 1<<20)
				t.Fatalf("the conductor stopped taking datagrams:\n%s", buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(50 * time.Microsecond)
		}
		select {
		case <-d.Terminated():
			t.Fatal("the driver stopped")
		default:
		}
	})
}

func TestMalformedDatagramsCounted(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20121", 1001)
	require.NoError(t, err)
	tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20121"))
	require.NotNil(t, tr)
	from := netip.MustParseAddrPort("127.0.0.1:40000")
	badVersion := make([]byte, 32)
	badVersion[4], badVersion[6] = 1, byte(protocol.TypeData)
	shortSetup := make([]byte, 20)
	shortSetup[0], shortSetup[6] = 20, byte(protocol.TypeSetup)
	unknown := make([]byte, 16)
	unknown[0], unknown[6] = 16, 0x44
	for _, b := range [][]byte{{}, {1, 2, 3}, badVersion, shortSetup, unknown} {
		tr.push(from, b)
	}
	invalid := d.c.sys[sysInvalidPackets]
	end := time.Now().Add(30 * time.Second)
	for invalid.Load() < 5 {
		require.False(t, time.Now().After(end), "invalid packets counted: %d of 5", invalid.Load())
		time.Sleep(time.Millisecond)
	}
	require.Empty(t, tr.sent(), "nothing answers a malformed datagram")
}

func TestUDPUnsupportedParametersRefused(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
	require.NoError(t, err)
	defer cl.Close()
	for channel, want := range map[string]string{
		"aeron:udp?endpoint=224.0.1.2:40456":                     "odd",
		"aeron:udp?endpoint=127.0.0.1:40456|interface=127.0.0.1": "interface",
		"aeron:udp?endpoint=127.0.0.1:40456|ats=true":            "ats=true: Aeron Transport Security",
	} {
		_, err := cl.AddPublication(context.Background(), channel, 1)
		require.Error(t, err, channel)
		require.Contains(t, err.Error(), want, channel)
		_, err = cl.AddSubscription(context.Background(), channel, 1)
		require.Error(t, err, channel)
		require.Contains(t, err.Error(), want, channel)
	}
	// cc= is static or cubic
	_, err = cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:40456|cc=reno", 1)
	require.ErrorContains(t, err, "cc=reno")
	// A dynamic multi-destination-cast channel without endpoint is a
	// publication's only.
	_, err = cl.AddSubscription(context.Background(), "aeron:udp?control=127.0.0.1:40457|control-mode=dynamic", 1)
	require.ErrorContains(t, err, "needs endpoint")
	// fc= is the publication's, on multicast only (unicast ignores it, as
	// the C driver does); a malformed one is refused with the reason.
	_, err = cl.AddPublication(context.Background(), "aeron:udp?endpoint=224.0.1.1:40456|fc=min,x:1", 1)
	require.ErrorContains(t, err, "fc=min,x:1")
	_, err = cl.AddPublication(context.Background(), "aeron:udp?endpoint=224.0.1.1:40456|fc=fastest", 1)
	require.ErrorContains(t, err, "fc=fastest")
}
