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

// sentSince returns what the transport sent after the first n datagrams.
func (t *fakeTransport) sentSince(n int) []fakeDatagram {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n >= len(t.out) {
		return nil
	}
	return append([]fakeDatagram(nil), t.out[n:]...)
}

// senderHarness is one network publication of an INVOKER driver whose
// sender and conductor duties the test runs itself, on a clock it sets:
// once the publication is handed to the sender, nothing else runs them,
// so step is the only duty cycle and its time the only time.
type senderHarness struct {
	d    *Driver
	cl   *client.Client
	pub  *client.Publication
	c    *conductor
	s    *sender
	p    *networkPublication
	tr   *fakeTransport
	base int64 // driver time of relative time 0
	mark int   // datagrams sent before the first step
}

func newSenderHarness(t *testing.T, channel string, streamID int32) *senderHarness {
	t.Helper()
	m := &fakeMedia{}
	cfg := udpTestConfig(t)
	cfg.ThreadingMode = Invoker
	d, err := Start(cfg, WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	// the driver runs itself only until the publication exists
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				if d.DoWork() == 0 {
					time.Sleep(50 * time.Microsecond)
				}
			}
		}
	}()
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	if err == nil {
		t.Cleanup(func() { cl.Close() })
	}
	var pub *client.Publication
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pub, err = cl.AddPublication(ctx, channel, streamID)
		cancel()
	}
	close(stop)
	<-done
	require.NoError(t, err)
	h := &senderHarness{d: d, cl: cl, pub: pub, c: d.c, s: d.c.snd}
	for i := 0; i < 100 && len(h.s.pubs) == 0; i++ {
		d.DoWork() // the sender takes the publication from its queue
	}
	require.Len(t, h.s.pubs, 1, "the sender has the publication")
	h.p = h.s.pubs[0]
	h.tr = h.p.t.(*fakeTransport)
	h.mark = len(h.tr.sent())
	// relative time 0 is well after anything the driver did on its own
	// clock, so the first step is due a SETUP as the capture's first
	// packet is
	h.base = max(h.s.nowNs, h.c.nowNs) + 10*setupTimeoutNs
	return h
}

// step is one duty cycle at relative time rel: the conductor's update of
// the publication (limits, draining, linger), then the sender's duty
// (control frames in, then SETUP, data, heartbeat).
func (h *senderHarness) step(rel int64) {
	now := h.base + rel
	h.c.nowNs, h.c.nowMs = now, now/1e6
	h.p.update(h.c)
	h.s.nowNs = now
	h.p.send(h.s)
}

// sent is what the publication sent since the harness started.
func (h *senderHarness) sent() []fakeDatagram { return h.tr.sentSince(h.mark) }

// closePublication is the conductor's handling of the client's
// REMOVE_PUBLICATION for the only link: the publication drains, then
// lingers sending EOS heartbeats.
func (h *senderHarness) closePublication(t *testing.T) {
	for _, l := range h.c.pubLinks {
		if l.net == h.p {
			h.c.unlinkPublication(l)
			require.Equal(t, pubDraining, h.p.state)
			return
		}
	}
	t.Fatal("no link to the publication")
}

// TestSetupDoesNotDelayHeartbeat: a SETUP is not data, so it does not put
// off the first heartbeat. The C sender (aeron_network_publication_setup_message_check)
// sets only the time of the last SETUP; its heartbeat check looks at the
// time of the last data or heartbeat, so the first duty cycle after the
// first status message, with nothing to send, sends a heartbeat at the
// sender position, however recently a SETUP went (udp-loss-cubic.pcap:
// SETUP at 603.7 ms, SM at 604.4 ms, heartbeat at 604.5 ms).
func TestSetupDoesNotDelayHeartbeat(t *testing.T) {
	h := newSenderHarness(t, "aeron:udp?endpoint=127.0.0.1:20121|term-length=64k|mtu=1408|session-id=7|init-term-id=100|term-id=102|term-offset=4096", 1001)
	h.step(0)
	sent := h.sent()
	require.Len(t, sent, 1)
	require.Equal(t, byte(protocol.TypeSetup), sent[0].b[6])
	sm := protocol.StatusMessage{SessionID: 7, StreamID: 1001, ConsumptionTermID: 102, ConsumptionTermOffset: 4096, ReceiverWindow: 32 << 10, ReceiverID: 1}
	b := make([]byte, protocol.StatusMessageHeaderLength)
	_, err := sm.Encode(b)
	require.NoError(t, err)
	h.tr.push(netip.MustParseAddrPort("127.0.0.1:20121"), b)
	h.step(int64(time.Millisecond))
	sent = h.sent()
	require.Len(t, sent, 2, "a heartbeat 1 ms after the SETUP, in the duty that read the first status message")
	want := protocol.DataHeader{FrameHeader: protocol.FrameHeader{Type: protocol.TypeData, Flags: protocol.FlagsHeartbeat},
		TermOffset: 4096, SessionID: 7, StreamID: 1001, TermID: 102}
	hb := make([]byte, protocol.DataHeaderLength)
	_, err = want.Encode(hb)
	require.NoError(t, err)
	require.Equal(t, hb, sent[1].b)
	h.step(50 * int64(time.Millisecond))
	require.Len(t, h.sent(), 2, "the next one after the heartbeat timeout, not before")
	h.step(102 * int64(time.Millisecond))
	require.Len(t, h.sent(), 3)
	require.Equal(t, hb, h.sent()[2].b)
}
