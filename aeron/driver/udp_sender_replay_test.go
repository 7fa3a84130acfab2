package driver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/pcap"
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
	h.tr = h.p.ep.t.(*fakeTransport)
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
	h.p.ep.poll()
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

type capPacket struct {
	idx        int
	rel        int64 // ns since the first packet
	fromSender bool
	b          []byte
}

// frameKind classifies what a sender sends.
type frameKind int

const (
	kindSetup frameKind = iota
	kindHeartbeat
	kindEOSHeartbeat
	kindData       // DATA datagram at or past the highest position sent so far
	kindRetransmit // DATA datagram behind it: a NAK's answer
	kindRTTM
	kindOther
)

func (k frameKind) String() string {
	return [...]string{"SETUP", "heartbeat", "EOS heartbeat", "DATA", "retransmit", "RTTM reply", "other"}[k]
}

// senderFrames are a sender's datagrams by kind, each list in the order
// sent, with the order of the SETUP and heartbeat kinds among themselves.
type senderFrames struct {
	byKind  map[frameKind][][]byte
	control []frameKind // SETUP, heartbeat and EOS heartbeat, in order
}

// classifier tells fresh DATA from retransmissions by the highest
// position the sender has sent, as a receiver would.
type classifier struct {
	shift   int
	initial int32
	highest int64
}

func (c *classifier) add(f *senderFrames, b []byte) frameKind {
	if f.byKind == nil {
		f.byKind = map[frameKind][][]byte{}
	}
	k := c.kind(b)
	f.byKind[k] = append(f.byKind[k], b)
	if k == kindSetup || k == kindHeartbeat || k == kindEOSHeartbeat {
		f.control = append(f.control, k)
	}
	return k
}

func (c *classifier) kind(b []byte) frameKind {
	fr, err := protocol.NextFrame(b, 0)
	if err != nil {
		return kindOther
	}
	switch fr.Header.Type {
	case protocol.TypeSetup:
		return kindSetup
	case protocol.TypeRTTM:
		return kindRTTM
	case protocol.TypeData, protocol.TypePad:
		var h protocol.DataHeader
		if h.Decode(b) != nil {
			return kindOther
		}
		if h.FrameLength == 0 && len(b) == protocol.DataHeaderLength {
			if h.Flags&protocol.FlagsHeartbeatEOS == protocol.FlagsHeartbeatEOS {
				return kindEOSHeartbeat
			}
			return kindHeartbeat
		}
		pos := logbuffer.ComputePosition(h.TermID, h.TermOffset, c.shift, c.initial)
		if pos < c.highest {
			return kindRetransmit
		}
		c.highest = pos + int64(len(b))
		return kindData
	}
	return kindOther
}

// compareFrames says where the ibgo sender's frames of the given kinds
// differ from the C sender's: count, order and every byte.
func compareFrames(want, got senderFrames, kinds ...frameKind) error {
	for _, k := range kinds {
		w, g := want.byKind[k], got.byKind[k]
		for i := 0; i < min(len(w), len(g)); i++ {
			if !bytes.Equal(w[i], g[i]) {
				return fmt.Errorf("%v %d of %d differs:\n C    % x\n ibgo % x", k, i, len(w), w[i], g[i])
			}
		}
		if len(w) != len(g) {
			return fmt.Errorf("%v: C sent %d, ibgo %d", k, len(w), len(g))
		}
	}
	return nil
}

// TestReplayCSenderAnswers replays the C receiver's side of
// udp-loss-cubic.pcap (status messages, NAKs, RTT measurement requests,
// at the capture's relative times) to an ibgo network publication built
// with the C publication's parameters and carrying the same messages, and
// checks that the ibgo sender answers as the C sender did, byte for byte:
// SETUPs until the first status message, the heartbeat that follows it,
// every DATA datagram, the retransmission answering each NAK, every RTTM
// reply, and the end-of-stream heartbeat while the closed publication
// lingers. It is the reverse of TestReplayCDriverCapture.
//
// The capture holds the first 1,500 packets of the run and its last 343;
// what happened in between (most of the stream, the publication's close)
// is not on record. The test runs the ibgo sender through that gap with
// status messages that follow it, compares nothing there, and closes the
// publication so that its linger (5 s, as the C driver's) covers the
// second part, where the C publication was lingering.
func TestReplayCSenderAnswers(t *testing.T) {
	r, err := pcap.NewReader(bytes.NewReader(testvec.MustBytes(testvec.LossCubicPcap)))
	require.NoError(t, err)
	var dec pcap.Decoder
	var pkts []capPacket
	var setup protocol.Setup
	var senderAddr, receiverAddr netip.AddrPort
	var t0 time.Time
	for i := 0; ; i++ {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		dg, kind, err := dec.Datagram(&p)
		require.NoError(t, err)
		require.Equal(t, pcap.KindUDP, kind)
		if i == 0 {
			t0 = p.Time
			require.NoError(t, setup.Decode(dg.Payload), "the capture starts with the C publication's SETUP")
			senderAddr, receiverAddr = dg.Src, dg.Dst
		}
		from := dg.Src == senderAddr
		require.True(t, from || dg.Src == receiverAddr, "packet %d: one publication, one receiver", i)
		pkts = append(pkts, capPacket{idx: i, rel: p.Time.Sub(t0).Nanoseconds(), fromSender: from, b: bytes.Clone(dg.Payload)})
	}
	require.Len(t, pkts, 1843)
	const firstPart = 1500 // then the last 343 packets of the run
	part1, part2 := pkts[:firstPart], pkts[firstPart:]
	require.Greater(t, part2[0].rel-part1[len(part1)-1].rel, int64(time.Second), "the two parts of the capture are apart")

	// The C publication: aeron:udp?endpoint=localhost:20121|term-length=64k
	// (cc=cubic is the subscription's: the C receiver measures RTT and
	// sizes its window with it; a publication has no cc, it answers
	// RTTM requests whatever the receiver's algorithm). Its session id,
	// initial term id, term length and MTU come from its SETUP; the
	// publication window is the default, term-length/2, in both drivers.
	channel := fmt.Sprintf("aeron:udp?endpoint=%s|term-length=%d|mtu=%d|session-id=%d|init-term-id=%d|term-id=%d|term-offset=%d",
		receiverAddr, setup.TermLength, setup.MTU, setup.SessionID, setup.InitialTermID, setup.ActiveTermID, setup.TermOffset)
	h := newSenderHarness(t, channel, setup.StreamID)
	require.Equal(t, int64(setup.TermLength/2), h.p.termWindow)
	shift := logbuffer.PositionBitsToShift(setup.TermLength)

	// The messages: 256 bytes, the first 8 the message number
	// (little-endian), the rest zero. need[i] is how many the C publisher
	// had written by packet i: all those its sender had sent by then. The
	// ibgo log holds no more than that at each step, so both senders see
	// the same data when they choose what to send.
	msg := make([]byte, 256)
	offered := int64(0)
	// A datagram that ends a term carries the padding frame's header, so
	// the C publisher had already written the padding, which it does when
	// the next message does not fit the term: it was writing that message
	// in the next term. That message is offered here too, but its frame
	// length stays 0 (not yet committed, as the C sender saw it) until the
	// next datagram.
	var hidden struct {
		term        []byte
		off, length int32
	}
	unhide := func() {
		if hidden.term != nil {
			logbuffer.FrameLengthOrdered(hidden.term, hidden.off, hidden.length)
			hidden.term = nil
		}
	}
	offer := func(n int64, rel int64) {
		t.Helper()
		unhide()
		for tries := 0; offered < n; tries++ {
			binary.LittleEndian.PutUint64(msg, uint64(offered))
			if h.pub.Offer(msg) > 0 {
				offered++
				continue
			}
			require.Less(t, tries, 100, "message %d not accepted (publication limit %d)", offered, h.p.pubLmt.Load())
			h.step(rel) // the conductor moves the publication limit
		}
	}
	offerHidden := func(rel int64) {
		t.Helper()
		offer(offered+1, rel)
		pos := h.p.producerPosition() - int64(protocol.DataHeaderLength+len(msg))
		require.Zero(t, pos&int64(setup.TermLength-1), "the message after a padding frame starts a term")
		hidden.term, hidden.off = h.p.log.Term(logbuffer.IndexByPosition(pos, shift)), 0
		hidden.length = logbuffer.FrameLengthVolatile(hidden.term, 0)
		logbuffer.FrameLengthOrdered(hidden.term, 0, 0)
	}
	need := make([]int64, len(pkts))
	padded := make([]bool, len(pkts)) // the datagram ends a term
	for i, pk := range pkts {
		if i > 0 {
			need[i] = need[i-1]
		}
		if !pk.fromSender || (pk.b[6] != byte(protocol.TypeData)) {
			continue
		}
		for off := 0; off < len(pk.b); {
			f, err := protocol.NextFrame(pk.b, off)
			require.NoError(t, err)
			if f.Header.Type == protocol.TypeData && f.Header.FrameLength > protocol.DataHeaderLength {
				require.Equal(t, int32(protocol.DataHeaderLength+len(msg)), f.Header.FrameLength, "packet %d: 256-byte messages", pk.idx)
				need[i] = max(need[i], int64(binary.LittleEndian.Uint64(pk.b[off+protocol.DataHeaderLength:]))+1)
			}
			padded[i] = padded[i] || f.Header.Type == protocol.TypePad
			if f.Header.FrameLength == 0 {
				break
			}
			off = f.Next
		}
	}

	// A 100 µs duty-cycle grid between packets, and a duty cycle at each
	// packet: after pushing a receiver frame (the sender reads control
	// frames first in its duty), or at the moment the C sender sent one.
	const grid = int64(100 * time.Microsecond)
	now := int64(0)
	advance := func(to int64) {
		for now+grid < to {
			now += grid
			h.step(now)
		}
		now = max(now, to)
	}
	naks := 0
	replay := func(part []capPacket, wantC, gotIbgo *senderFrames, cc, gc *classifier) {
		start := len(h.sent())
		for _, pk := range part {
			advance(pk.rel)
			if pk.fromSender {
				if k := cc.add(wantC, pk.b); k == kindData {
					offer(need[pk.idx], now)
					if padded[pk.idx] {
						offerHidden(now)
					}
				}
			} else {
				h.tr.push(receiverAddr, pk.b)
			}
			before, sentPos := len(h.sent()), h.p.senderPosition
			h.step(now)
			if !pk.fromSender && pk.b[6] == byte(protocol.TypeNak) {
				// the answer goes in the duty that reads the NAK: its
				// first datagram starts where the NAK does
				var nak protocol.Nak
				require.NoError(t, nak.Decode(pk.b))
				var first protocol.DataHeader
				for _, dg := range h.sent()[before:] {
					var d protocol.DataHeader
					if d.Decode(dg.b) == nil && d.Type == protocol.TypeData && d.FrameLength > 0 &&
						logbuffer.ComputePosition(d.TermID, d.TermOffset, shift, setup.InitialTermID) < sentPos {
						first = d
						break
					}
				}
				require.Equal(t, [2]int32{nak.TermID, nak.TermOffset}, [2]int32{first.TermID, first.TermOffset}, "packet %d: NAK answered", pk.idx)
				naks++
			}
		}
		for _, dg := range h.sent()[start:] {
			require.Equal(t, receiverAddr, dg.addr, "everything goes to the receiver's endpoint")
			gc.add(gotIbgo, dg.b)
		}
		// RTTM replies are compared for the requests whose C reply is in
		// the capture: not the C replies to requests before the part
		// (in the gap), nor ibgo's to requests whose C reply came after
		// the part ended.
		requested := map[int64]bool{}
		lastReply := -1
		for i, pk := range part {
			if pk.b[6] == byte(protocol.TypeRTTM) {
				if pk.fromSender {
					lastReply = i
				} else {
					requested[int64(binary.LittleEndian.Uint64(pk.b[16:]))] = true
				}
			}
		}
		late := map[int64]bool{}
		for _, pk := range part[lastReply+1:] {
			if !pk.fromSender && pk.b[6] == byte(protocol.TypeRTTM) {
				late[int64(binary.LittleEndian.Uint64(pk.b[16:]))] = true
			}
		}
		filter := func(l [][]byte, keep func(echo int64) bool) [][]byte {
			var out [][]byte
			for _, b := range l {
				if keep(int64(binary.LittleEndian.Uint64(b[16:]))) {
					out = append(out, b)
				}
			}
			return out
		}
		wantC.byKind[kindRTTM] = filter(wantC.byKind[kindRTTM], func(e int64) bool { return requested[e] })
		gotIbgo.byKind[kindRTTM] = filter(gotIbgo.byKind[kindRTTM], func(e int64) bool { return !late[e] })
	}

	// Part 1: connection, the stream's first 3,700-odd messages, NAKs.
	var want1, got1 senderFrames
	cc := &classifier{shift: shift, initial: setup.InitialTermID, highest: 0}
	gc := &classifier{shift: shift, initial: setup.InitialTermID, highest: 0}
	replay(part1, &want1, &got1, cc, gc)
	require.NoError(t, compareFrames(want1, got1, kindSetup, kindHeartbeat, kindEOSHeartbeat, kindData, kindRetransmit, kindRTTM))
	require.Equal(t, want1.control, got1.control, "SETUPs, then the heartbeat that follows the first status message")
	require.Len(t, want1.byKind[kindSetup], 7)
	require.Len(t, want1.byKind[kindHeartbeat], 1)
	require.Equal(t, 27, naks)
	require.Len(t, want1.byKind[kindRetransmit], naks, "the C sender answered each NAK with one datagram")
	require.Greater(t, len(want1.byKind[kindRTTM]), 100)
	require.Zero(t, len(got1.byKind[kindOther]))

	// The test can fail: a retransmission from a wrong term offset, a
	// SETUP with another active term, an RTTM reply with the reception
	// delta set, are each caught.
	for name, mutate := range map[string]func(f senderFrames){
		"retransmit term offset": func(f senderFrames) { binary.LittleEndian.PutUint32(f.byKind[kindRetransmit][0][8:], 32) },
		"setup active term id":   func(f senderFrames) { f.byKind[kindSetup][3][24]++ },
		"rttm reception delta":   func(f senderFrames) { f.byKind[kindRTTM][5][24] = 1 },
	} {
		bad := senderFrames{byKind: map[frameKind][][]byte{}}
		for k, l := range got1.byKind {
			for _, b := range l {
				bad.byKind[k] = append(bad.byKind[k], bytes.Clone(b))
			}
		}
		mutate(bad)
		require.Error(t, compareFrames(want1, bad, kindSetup, kindData, kindRetransmit, kindRTTM), name)
	}

	// The gap: the receiver keeps up (a status message at the sender
	// position every millisecond, the last window of part 1), the
	// publisher writes the rest of the stream, up to the position of the
	// C publication's end of stream in part 2, and closes its publication.
	var eosHB protocol.DataHeader
	for _, pk := range part2 {
		if pk.fromSender && pk.b[6] == byte(protocol.TypeData) {
			require.NoError(t, eosHB.Decode(pk.b))
		}
	}
	require.Equal(t, uint8(protocol.FlagsHeartbeatEOS), eosHB.Flags, "part 2 has the C publication's EOS heartbeat")
	eosPosition := logbuffer.ComputePosition(eosHB.TermID, eosHB.TermOffset, shift, setup.InitialTermID)
	var lastSM protocol.StatusMessage
	for _, pk := range part1 {
		if !pk.fromSender && pk.b[6] == byte(protocol.TypeStatusMessage) {
			require.NoError(t, lastSM.Decode(pk.b))
		}
	}
	smBuf := make([]byte, protocol.StatusMessageHeaderLength)
	keepUp := func() {
		sm := lastSM
		sm.ConsumptionTermID = logbuffer.ComputeTermIDFromPosition(h.p.senderPosition, shift, setup.InitialTermID)
		sm.ConsumptionTermOffset = logbuffer.ComputeTermOffsetFromPosition(h.p.senderPosition, shift)
		_, err := sm.Encode(smBuf)
		require.NoError(t, err)
		h.tr.push(receiverAddr, smBuf)
	}
	// closing 1 s before part 2: the C publication's linger (5 s) was
	// still running at its end, so it closed less than 5 s before
	closeAt := part2[0].rel - int64(time.Second)
	unhide()
	for now < closeAt {
		now += grid
		if now%int64(time.Millisecond) < grid {
			keepUp()
		}
		for h.p.producerPosition() < eosPosition {
			binary.LittleEndian.PutUint64(msg, uint64(offered))
			if h.pub.Offer(msg) < 0 {
				break
			}
			offered++
		}
		h.step(now)
	}
	require.Equal(t, eosPosition, h.p.producerPosition(), "the same messages end the stream at the same position")
	require.Equal(t, eosPosition, h.p.senderPosition, "all sent before the close")
	h.closePublication(t)
	closedSent := len(h.sent())
	for now+grid < part2[0].rel {
		now += grid
		if now%int64(200*time.Millisecond) < grid {
			keepUp()
		}
		h.step(now)
	}
	require.Equal(t, pubLinger, h.p.state)

	// Part 2: the lingering publication answers RTTM requests and sends
	// EOS heartbeats, up to the receiver's EOS status message. That ends
	// the linger of a unicast publication in the C driver 1.48
	// (has_received_unicast_eos in aeron_network_publication.c's LINGER
	// state) and in ibgo; the C driver that made the capture still
	// answered RTTM requests after it, so the capture is compared up to
	// that message, and after it ibgo's publication is gone.
	eosSM := -1
	for i, pk := range part2 {
		if !pk.fromSender && pk.b[6] == byte(protocol.TypeStatusMessage) && pk.b[5]&protocol.SMFlagEOS != 0 {
			eosSM = i
			break
		}
	}
	require.Positive(t, eosSM, "part 2 has the receiver's EOS status message")
	var want2, got2 senderFrames
	replay(part2[:eosSM+1], &want2, &got2, cc, gc)
	require.NoError(t, compareFrames(want2, got2, kindRTTM, kindData, kindRetransmit, kindHeartbeat))
	now += grid
	h.step(now) // the conductor sees it at its next duty
	require.Equal(t, pubDone, h.p.state, "the unicast receiver's EOS status message ended the linger")
	for _, pk := range part2[eosSM+1:] {
		if pk.fromSender {
			cc.add(&want2, pk.b)
		}
	}
	// How many EOS heartbeats fall in part 2's 76 ms depends on when the
	// publication closed, which the capture does not show (they come
	// every 100 ms), so their count is not compared: every EOS heartbeat
	// ibgo sent since the close has the C heartbeat's bytes.
	require.Len(t, want2.byKind[kindEOSHeartbeat], 1)
	cEOS := want2.byKind[kindEOSHeartbeat][0]
	var eosSent int
	for _, dg := range h.sent()[closedSent:] {
		var k classifier
		if k.kind(dg.b) == kindEOSHeartbeat {
			require.Equal(t, cEOS, dg.b, "EOS heartbeat")
			eosSent++
		}
	}
	require.Greater(t, eosSent, 5, "EOS heartbeats while lingering")
	t.Logf("part 1: %d SETUPs, %d heartbeat, %d DATA, %d retransmissions, %d RTTM replies identical; part 2: %d RTTM replies; %d EOS heartbeats",
		len(got1.byKind[kindSetup]), len(got1.byKind[kindHeartbeat]), len(got1.byKind[kindData]), len(got1.byKind[kindRetransmit]),
		len(got1.byKind[kindRTTM]), len(got2.byKind[kindRTTM]), eosSent)
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
