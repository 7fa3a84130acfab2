package ib

// ib-mode=write: an ib-qp=rc publication places its frames straight into
// the subscriber's image with RDMA WRITE, and the receiving driver copies
// nothing (docs/aeron.md, "One-sided writes").
//
// The contract, on one connection:
//   - The publication's CONNECT asks for it (rcConnWrite in the private
//     data). When the receiving driver starts an image for a session that
//     came on such a connection (driver.ImageGranter), the subscription
//     registers that image's three terms, and nothing else, with remote
//     write access, and sends the grant on the connection (a medium
//     message no Aeron layer sees, rcGrantMagic): the terms' address and
//     rkey, term length, initial term id, the position the first write
//     lands at, and the image's slot on the connection.
//   - The publication sends each datagram of DATA frames (or a padding
//     frame's header) as an RDMA WRITE WITH IMMEDIATE to the same term
//     offset in the image (consecutive datagrams of one Send, from the
//     same log and term, as one), leaving out the first frame's 4-byte
//     length word: immediate = slot<<24 | (term id & 0xff)<<16 | that length (0
//     for a padding frame longer than 16 bits: it runs to the term's end).
//     Writes go strictly in order from the granted position; a datagram
//     behind it is skipped (already written), one ahead of it is preceded
//     by the frames in between, written again from the publication's log.
//   - The subscription keeps, per granted image, the position the next
//     write lands at. An immediate's completion (RC: every write before
//     it is placed) has it check the frame headers from there (type, term
//     id, term offset, session, stream, lengths), store the first frame's
//     length last, and hand the frames to the driver as a slice of the
//     term itself, where the image finds them in place. Until that store,
//     a subscriber reading the term stops at the zero length word, so no
//     frame is read while the device may still be placing it.
//   - Everything else (SETUP, heartbeats, EOS, status messages, NAKs,
//     RTT) goes as SEND/RECV, as in ib-mode=send.
//   - A lost connection revokes the grants on it: the MR is deregistered
//     (no write lands after that), then the window ahead of the last
//     announced position is zeroed (a write cut short there was never
//     announced). The publication asks again on its next connection
//     (rcAskMagic) and is granted from the image's position then; a
//     grant the device refuses is denied and the session sends as
//     ib-mode=send on that connection.

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
	"github.com/ibgo/ibgo/uverbs"
)

const (
	// rcConnWrite is the CONNECT flag of an ib-mode=write publication.
	rcConnWrite = 1
	// rcGrantMagic starts a subscription's grant message; rcAskMagic a
	// publication's request for one. As the first 4 bytes of an Aeron
	// frame they would be a frame length above any mtu, so neither can be
	// taken for one.
	rcGrantMagic = "AIBW"
	rcAskMagic   = "AIBQ"
	rcGrantLen   = 48
	rcAskLen     = 16
	grantDenied  = 1
	// padPlaced in an immediate's length says a padding frame was written
	// with its length word (too long for 32-byte units in 16 bits)
	padPlaced = 0xffff
	// askAgainNs is how often a publication asks for a grant it lacks
	askAgainNs = int64(100 * time.Millisecond)
	// wSlots is how many granted images one connection can carry (the
	// immediate's top 8 bits).
	wSlots = 256
)

func sessionKey(session, stream int32) uint64 {
	return uint64(uint32(session))<<32 | uint64(uint32(stream))
}

// ---- subscription side

// wImage is an image granted (or to be granted again) to a publication's
// connection. The agent's.
type wImage struct {
	g     driver.ImageGrant
	shift int
	// next is where the next write lands: the end of the last batch
	// announced (the image's frontier while granted)
	next int64
	conn *rcConn
	mr   *uverbs.MR
	slot int
}

func (w *wImage) term(pos int64) (term []byte, off int) {
	tl := int(w.g.TermLength)
	idx := int((pos >> w.shift) % logbuffer.PartitionCount)
	return w.g.Terms[idx*tl : (idx+1)*tl], int(pos & int64(tl-1))
}

// frontier is the first position at or after from whose frame length is
// zero (or whose frame is of an older term): where a subscriber reading
// the image stops.
func (w *wImage) frontier(from int64, limit int) int64 {
	pos := from
	for pos-from < int64(limit) {
		term, off := w.term(pos)
		fl := shm.LoadInt32(term, off)
		if fl <= 0 || int32(binary.LittleEndian.Uint32(term[off+20:])) != w.g.InitialTermID+int32(pos>>w.shift) {
			break
		}
		pos += int64(protocol.Align(int(fl), logbuffer.FrameAlignment))
	}
	return pos
}

// ahead is how far past the frontier a publication may have written: its
// window, at most half a term (Aeron's bound on a receiver window), so
// clearing it never reaches a term a subscriber may still read.
func (t *rcTransport) ahead(w *wImage) int {
	return min(t.window, int(w.g.TermLength)/2)
}

// zeroAhead clears n bytes of the terms from pos on (across a term's end):
// what a write cut short there left is never read as frames. Nothing
// reads there: subscribers stop at pos, whose length word is zero.
func (w *wImage) zeroAhead(pos int64, n int) {
	for n > 0 {
		term, off := w.term(pos)
		k := min(n, len(term)-off)
		shm.StoreInt32(term, off, 0) // pos is a frame's start: 4-byte aligned
		if k > 4 {
			clear(term[off+4 : off+k])
		}
		pos += int64(k)
		n -= k
	}
}

// GrantImage implements driver.ImageGranter: the image is granted to the
// connection its SETUP came on if that publication asked for ib-mode=write.
func (t *rcTransport) GrantImage(g driver.ImageGrant) (func(), bool) {
	if t.connect.IsValid() || len(g.Terms) != logbuffer.PartitionCount*int(g.TermLength) {
		return nil, false
	}
	t.drain()
	c := t.byAddr[g.From]
	if c != nil && !c.write {
		return nil, false // a publication that sends
	}
	w := &wImage{g: g, shift: logbuffer.PositionBitsToShift(g.TermLength), next: g.Position, slot: -1}
	k := sessionKey(g.SessionID, g.StreamID)
	if old := t.wimgs[k]; old != nil {
		t.ungrant(old, false)
	}
	t.wimgs[k] = w
	if c != nil {
		t.grantTo(c, w)
	} // else its connection went already: the next one asks (onAsk)
	return func() {
		if w.conn != nil {
			t.ungrant(w, false) // the image goes: nothing to clean
		}
		if t.wimgs[k] == w {
			delete(t.wimgs, k)
		}
	}, true
}

// grantTo registers w's terms for c's peer to write and sends the grant;
// a refusal is reported and sent as a denial (the session then sends).
func (t *rcTransport) grantTo(c *rcConn, w *wImage) {
	if w.conn != nil {
		t.ungrant(w, true)
	}
	if c.wslots == nil {
		c.wslots = make([]*wImage, wSlots)
	}
	// From the image's frontier: whatever lies beyond it (frames copied
	// in past a gap before this grant, a write cut short) is cleared, so
	// that the only frames ahead of a subscriber are written from here on.
	w.next = w.frontier(w.next, t.ahead(w))
	w.zeroAhead(w.next, t.ahead(w))
	slot := -1
	for i, x := range c.wslots {
		if x == nil {
			slot = i
			break
		}
	}
	var err error
	if slot < 0 {
		err = fmt.Errorf("%d images on one connection already", wSlots)
	} else {
		w.mr, err = t.pd.RegMR(w.g.Terms, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	}
	if err != nil {
		t.m.RC.GrantsDenied.Add(1)
		t.m.report(fmt.Errorf("ib: rc subscription %s cannot grant the image of session %d stream %d to %s (it sends instead): %w",
			t.local, w.g.SessionID, w.g.StreamID, c.addr, err))
		t.sendGrant(c, w, true)
		return
	}
	c.wslots[slot], w.slot, w.conn = w, slot, c
	t.m.RC.GrantsIssued.Add(1)
	t.sendGrant(c, w, false)
}

// ungrant ends w's grant: the MR goes first (no write lands after it),
// then, when zero, what a write cut short may have left ahead of w.next.
func (t *rcTransport) ungrant(w *wImage, zero bool) {
	if w.mr != nil {
		_ = w.mr.Close()
		w.mr = nil
	}
	if c := w.conn; c != nil && w.slot >= 0 && c.wslots[w.slot] == w {
		c.wslots[w.slot] = nil
	}
	w.conn, w.slot = nil, -1
	t.m.RC.GrantsRevoked.Add(1)
	if zero {
		w.zeroAhead(w.next, t.ahead(w))
	}
}

// ungrantAll revokes every grant of c (lost or dropped). Agent.
func (t *rcTransport) ungrantAll(c *rcConn) {
	for _, w := range c.wslots {
		if w != nil {
			t.ungrant(w, true)
		}
	}
}

// sendGrantsDue sends the grants a full send queue held back, as long as
// their image still holds the connection they were for. Agent.
func (t *rcTransport) sendGrantsDue() {
	due := t.grantsDue
	t.grantsDue = nil
	for _, d := range due {
		switch w := d.w; {
		case d.c.closing.Load():
		case w.conn == d.c:
			t.sendGrant(d.c, w, false)
		case d.denied && w.conn == nil:
			t.sendGrant(d.c, w, true)
		} // else granted elsewhere since: not sent twice
	}
}

func (t *rcTransport) sendGrant(c *rcConn, w *wImage, denied bool) {
	b := t.ctlMsg[:rcGrantLen]
	clear(b)
	copy(b, rcGrantMagic)
	b[4] = 1 // version
	if denied {
		b[5] = grantDenied
	} else {
		b[6] = uint8(w.slot)
		binary.LittleEndian.PutUint64(b[32:], w.mr.Addr())
		binary.LittleEndian.PutUint32(b[40:], w.mr.RKey())
	}
	le := binary.LittleEndian
	le.PutUint32(b[8:], uint32(w.g.SessionID))
	le.PutUint32(b[12:], uint32(w.g.StreamID))
	le.PutUint32(b[16:], uint32(w.g.InitialTermID))
	le.PutUint32(b[20:], uint32(w.g.TermLength))
	le.PutUint64(b[24:], uint64(w.next))
	t.ctlBatch[0] = b
	n, _ := t.Send(c.addr, t.ctlBatch[:])
	t.ctlBatch[0] = nil
	if n == 0 && !c.closing.Load() {
		// the connection's send queue is full: the next Recv sends it
		t.grantsDue = append(t.grantsDue, grantDue{w: w, c: c, denied: denied})
	}
}

// grantDue is a grant (or denial) for connection c a full send queue held
// back.
type grantDue struct {
	w      *wImage
	c      *rcConn
	denied bool
}

// onAsk answers a publication asking again on a new connection.
func (t *rcTransport) onAsk(c *rcConn, b []byte) {
	if len(b) < rcAskLen || !c.write {
		return
	}
	k := sessionKey(int32(binary.LittleEndian.Uint32(b[8:])), int32(binary.LittleEndian.Uint32(b[12:])))
	w := t.wimgs[k]
	if w == nil || w.conn == c || c.addr.Addr() != w.g.From.Addr() {
		// no such image here (any more), granted already, or asked by
		// another host than the one its SETUP came from
		return
	}
	// from the image's position: rcv-pos, or further where frames are
	// already in place beyond it
	if w.g.Rebuilt != nil {
		w.next = max(w.next, w.g.Rebuilt())
	}
	t.grantTo(c, w)
}

// placed takes the write announced by imm on c: it checks the frames from
// the image's next position, stores the first one's length and returns
// them as a slice of the term for the driver.
func (t *rcTransport) placed(c *rcConn, imm uint32) ([]byte, error) {
	slot := int(imm >> 24)
	var w *wImage
	if c.wslots != nil {
		w = c.wslots[slot]
	}
	if w == nil {
		return nil, fmt.Errorf("an RDMA write announced for image slot %d, which this connection was not granted", slot)
	}
	pos := w.next
	term, off := w.term(pos)
	tl := len(term)
	termID := w.g.InitialTermID + int32(pos>>w.shift)
	bad := func(what string, at int) error {
		return fmt.Errorf("the write to session %d stream %d at term %d offset %d: %s at offset %d", w.g.SessionID, w.g.StreamID, termID, off, what, at)
	}
	if uint8(imm>>16) != uint8(termID) {
		return nil, bad(fmt.Sprintf("its immediate names term id ...%02x", uint8(imm>>16)), off)
	}
	if off+protocol.DataHeaderLength > tl {
		return nil, bad("no room for a frame header", off)
	}
	first := int(imm & 0xffff)
	typ, err := w.checkHeader(term, off, termID)
	if err != nil {
		return nil, bad(err.Error(), off)
	}
	frames := 1
	placedLength := false
	if typ == protocol.TypePad {
		// a padding frame's length travels in 32-byte units, 0 to the
		// term's end, padPlaced: written with the frame (prepareWrite)
		switch first {
		case 0:
			first = tl - off
		case padPlaced:
			first, placedLength = int(shm.LoadInt32(term, off)), true
		default:
			first *= logbuffer.FrameAlignment
		}
	}
	if first < protocol.DataHeaderLength || off+first > tl {
		return nil, bad(fmt.Sprintf("a frame of %d bytes", first), off)
	}
	end := off + protocol.Align(first, logbuffer.FrameAlignment)
	// the write's other frames were placed with their lengths (the
	// datagrams of one of the sender's duties may be one write; a 32-byte
	// padding frame, an aborted claim, may sit among them); the next
	// write's first length is still zero
	for end < tl && end-off < max(t.window, t.mtu) {
		fl := int(shm.LoadInt32(term, end))
		if fl == 0 {
			break
		}
		if _, err := w.checkHeader(term, end, termID); err != nil {
			return nil, bad(err.Error(), end)
		}
		if fl < protocol.DataHeaderLength || end+fl > tl {
			return nil, bad(fmt.Sprintf("a frame of %d bytes", fl), end)
		}
		end += protocol.Align(fl, logbuffer.FrameAlignment)
		frames++
	}
	if placedLength && end != off+protocol.Align(first, logbuffer.FrameAlignment) {
		return nil, bad("a padding frame written whole with frames after it", off)
	}
	buf := term[off:end]
	if typ == protocol.TypePad && frames == 1 {
		buf = term[off : off+protocol.DataHeaderLength] // as a padding frame travels alone
	}
	w.next = pos + int64(end-off)
	// last: the frames become readable
	shm.StoreInt32(term, off, int32(first))
	t.m.RC.Immediates.Add(1)
	t.m.RC.PlacedFrames.Add(int64(frames))
	t.m.RC.PlacedBytes.Add(int64(len(buf)))
	return buf, nil
}

// checkHeader checks the placed frame header at off (all but its length):
// DATA or PAD, of w's session and stream, at this term id and offset.
func (w *wImage) checkHeader(term []byte, off int, termID int32) (protocol.FrameType, error) {
	le := binary.LittleEndian
	h := term[off : off+protocol.DataHeaderLength]
	typ := protocol.FrameType(le.Uint16(h[6:]))
	switch {
	case typ != protocol.TypeData && typ != protocol.TypePad:
		return typ, fmt.Errorf("frame type %d", typ)
	case int32(le.Uint32(h[8:])) != int32(off):
		return typ, fmt.Errorf("a header naming term offset %d", int32(le.Uint32(h[8:])))
	case int32(le.Uint32(h[12:])) != w.g.SessionID || int32(le.Uint32(h[16:])) != w.g.StreamID:
		return typ, fmt.Errorf("a header of session %d stream %d", int32(le.Uint32(h[12:])), int32(le.Uint32(h[16:])))
	case int32(le.Uint32(h[20:])) != termID:
		return typ, fmt.Errorf("a header naming term id %d", int32(le.Uint32(h[20:])))
	}
	return typ, nil
}

// ---- publication side

// wGrant is a grant a publication's connection holds for one session.
type wGrant struct {
	initialTermID int32
	termLength    int32
	shift         int
	next          int64 // where the next write lands
	addr          uint64
	rkey          uint32
	slot          uint8
	denied        bool
}

func (g *wGrant) position(termID, off int32) int64 {
	return int64(termID-g.initialTermID)<<g.shift + int64(off)
}

// onGrant records a subscription's grant (or denial).
func (t *rcTransport) onGrant(c *rcConn, b []byte) {
	if len(b) < rcGrantLen || c.grants == nil {
		return
	}
	le := binary.LittleEndian
	tl := int32(le.Uint32(b[20:]))
	if logbuffer.CheckTermLength(int64(tl)) != nil {
		return
	}
	g := &wGrant{initialTermID: int32(le.Uint32(b[16:])), termLength: tl, shift: logbuffer.PositionBitsToShift(tl),
		next: int64(le.Uint64(b[24:])), addr: le.Uint64(b[32:]), rkey: le.Uint32(b[40:]), slot: b[6], denied: b[5]&grantDenied != 0}
	c.grants[sessionKey(int32(le.Uint32(b[8:])), int32(le.Uint32(b[12:])))] = g
}

// wKind is what sendWrite does with a datagram.
type wKind int

const (
	wSend  wKind = iota // as ib-mode=send: not a frame that is written
	wWrite              // written at its position
	wSkip               // written already
	wDrop               // no grant (yet) on this connection
)

// classify says what a write-mode publication does with d.
func (t *rcTransport) classify(c *rcConn, d []byte) (wKind, *wGrant, int64, int64) {
	if len(d) < protocol.DataHeaderLength {
		return wSend, nil, 0, 0
	}
	le := binary.LittleEndian
	fl := int32(le.Uint32(d))
	typ := protocol.FrameType(le.Uint16(d[6:]))
	if (typ != protocol.TypeData && typ != protocol.TypePad) || (typ == protocol.TypeData && fl == 0) {
		return wSend, nil, 0, 0 // SETUP, RTT, heartbeats, EOS
	}
	k := sessionKey(int32(le.Uint32(d[12:])), int32(le.Uint32(d[16:])))
	g := c.grants[k]
	if g == nil {
		// ask on this connection, and again every askAgainNs while no
		// grant comes (a grant the subscription could not send, an image
		// it did not have yet); the clock is read only on this path
		if now := time.Now().UnixNano(); now-c.asked[k] >= askAgainNs {
			c.asked[k] = now
			c.askFor = append(c.askFor, k)
		}
		return wDrop, nil, 0, 0
	}
	if g.denied {
		return wSend, nil, 0, 0
	}
	pos := g.position(int32(le.Uint32(d[20:])), int32(le.Uint32(d[8:])))
	end := pos + span(d)
	if end <= g.next {
		return wSkip, g, pos, end
	}
	return wWrite, g, pos, end
}

// sendWrite is Send on a write-mode publication's connection c.
func (t *rcTransport) sendWrite(c *rcConn, datagrams [][]byte) (int, error) {
	sent, k := 0, 0
	// the last write prepared, which a datagram right after it in the
	// same term and the same log joins (one write, one immediate)
	lastK, lastTerm := -1, int64(0)
	var lastG *wGrant
	post := func() bool {
		lastK, lastG = -1, nil
		if k == 0 {
			return true
		}
		n, err := t.post(c, k)
		k = 0
		if err != nil || n == 0 && c.closing.Load() {
			if err != nil {
				t.fail(c, "post send: "+err.Error())
			}
			return false
		}
		return true
	}
	// room makes a work request free, posting those prepared and reaping
	// completions; false: none (a short send) or the connection is gone
	room := func() bool {
		if k < postBatch && k < c.nfree {
			return true
		}
		if !post() {
			return false
		}
		if c.nfree == 0 {
			if err := t.poll(c.cq, c); err != nil || c.closing.Load() {
				return false
			}
			if c.nfree == 0 && t.stalled(c) {
				return false // c is closing: lost
			}
		}
		return c.nfree > 0
	}
	lost := func() (int, error) {
		t.m.RC.Dropped.Add(int64(len(datagrams) - sent))
		return len(datagrams), nil
	}
	for len(c.askFor) > 0 {
		if !room() {
			if c.closing.Load() {
				return lost()
			}
			return sent, nil
		}
		key := c.askFor[0]
		c.askFor = c.askFor[1:]
		ask := make([]byte, rcAskLen) // once a connection per session
		copy(ask, rcAskMagic)
		binary.LittleEndian.PutUint32(ask[8:], uint32(key>>32))
		binary.LittleEndian.PutUint32(ask[12:], uint32(key))
		t.prepare(c, k, ask)
		k++
	}
	for sent < len(datagrams) {
		d := datagrams[sent]
		if len(d) > t.mtu {
			if !post() {
				return lost()
			}
			return sent, fmt.Errorf("ib: frame of %d bytes to %s is above the channel mtu %d", len(d), t.connect, t.mtu)
		}
		kind, g, pos, end := t.classify(c, d)
		switch kind {
		case wSend:
			if !room() {
				if c.closing.Load() {
					return lost()
				}
				return sent, nil
			}
			t.prepare(c, k, d)
			k++
		case wDrop:
			t.m.RC.Dropped.Add(1)
		case wSkip:
			t.m.RC.WriteSkipped.Add(1)
		case wWrite:
			// the frames between what was written and d first, from the log
			for g.next < pos {
				chunk := t.rewriteChunk(g, d, pos)
				if chunk == nil {
					break // not in a log here: the receiver's NAK brings them
				}
				if !room() {
					if c.closing.Load() {
						return lost()
					}
					return sent, nil
				}
				p := g.next
				t.prepareWrite(c, k, g, chunk, p, p+span(chunk))
				k++
				t.m.RC.Rewritten.Add(int64(len(chunk)))
			}
			if g.next < pos {
				t.m.RC.Dropped.Add(1)
				break
			}
			if !room() {
				if c.closing.Load() {
					return lost()
				}
				return sent, nil
			}
			if pos < g.next {
				d, pos = d[g.next-pos:], g.next // a retransmit reaching past what was written
			}
			// end is still d's end when a retransmit was trimmed at its front
			if lastK >= 0 && lastK == k-1 && lastG == g && pos>>g.shift == lastTerm && t.extendWrite(c, lastK, d) {
				g.next = end
				t.m.RC.WriteBytes.Add(int64(len(d)))
				t.m.RC.Joined.Add(1)
				break
			}
			t.prepareWrite(c, k, g, d, pos, end)
			lastK, lastG, lastTerm = k, g, pos>>g.shift
			k++
		}
		sent++
	}
	if !post() {
		return lost()
	}
	return sent, nil
}

// prepareWrite fills work request k of c's next list with an RDMA WRITE
// WITH IMMEDIATE of d (whole frames from a log, or a padding header) to
// pos in the granted image, its first length word left out, and moves
// g.next to end (where d reaches: span).
func (t *rcTransport) prepareWrite(c *rcConn, k int, g *wGrant, d []byte, pos, end int64) {
	le := binary.LittleEndian
	tl := int64(g.termLength)
	idx, off := (pos>>g.shift)%logbuffer.PartitionCount, pos&(tl-1)
	termID := g.initialTermID + int32(pos>>g.shift)
	first := le.Uint32(d)
	whole := false
	if protocol.FrameType(le.Uint16(d[6:])) == protocol.TypePad {
		// in 32-byte units (padding is whole frames), 0 to the term's
		// end: a padding frame of up to 2 MiB fits anywhere in a term
		switch {
		case int64(off)+int64(first) == tl:
			first = 0
		case first%logbuffer.FrameAlignment == 0 && first/logbuffer.FrameAlignment < padPlaced:
			first /= logbuffer.FrameAlignment
		case len(d) == protocol.DataHeaderLength:
			// a padding frame alone and longer (an unblocked claim in a
			// large term): written with its length word, which is safe to
			// show early (in the zeroed window a frame whose length is all
			// that is placed reads as padding, type 0), and announced as
			// placed
			first, whole = padPlaced, true
			t.m.RC.LongPadding.Add(1)
		default:
			first = padPlaced // refused by the subscription: not expected from Aeron's scanner
		}
	}
	skip := 4 // the first length word stays out
	if whole {
		skip = 0
	}
	slot := (c.head + k) % c.slotsN
	wr := &c.swr[k]
	*wr = uverbs.SendWR{WRID: rcSendWRID | uint64(c.key)<<16 | uint64(slot), Opcode: uverbs.WRRDMAWriteWithImm,
		Imm: uint32(g.slot)<<24 | uint32(uint8(termID))<<16 | first, RemoteAddr: g.addr + uint64(idx*tl+off) + uint64(skip), RKey: g.rkey}
	t.m.fillSend(wr, c.ssge[k:k+1], d[skip:], slot, c.inline, &t.regions, &c.slots, c.mem.Bytes(), c.mr, c.sendBase+slot*t.mtu)
	g.next = end
	t.m.RC.Writes.Add(1)
	t.m.RC.WriteBytes.Add(int64(len(d)))
}

// extendWrite joins d to write request j of c's list when d follows its
// bytes in the same registered log (the sender's datagrams of one duty are
// consecutive in the term): the write grows, its immediate stays that of
// its first frame, and the subscription's walk takes every frame of it.
// False when j reads a bounce slot or inline data, d is elsewhere, or the
// log's in-flight bound would be passed.
func (t *rcTransport) extendWrite(c *rcConn, j int, d []byte) bool {
	if j < 0 || j >= len(c.swr) {
		return false
	}
	wr := &c.swr[j]
	if wr.Opcode != uverbs.WRRDMAWriteWithImm || wr.InlineData != nil || len(wr.SGL) != 1 {
		return false
	}
	slot := (c.head + j) % c.slotsN
	r := c.slots.reg[slot]
	if r == nil || r.mr == nil || r.inFlight+len(d) > r.budget {
		return false
	}
	sge, ok := r.mr.SGEOf(d)
	prev := &wr.SGL[0]
	if !ok || sge.LKey != prev.LKey || sge.Addr != prev.Addr+uint64(prev.Length) {
		return false
	}
	prev.Length += uint32(len(d))
	r.inFlight += len(d)
	c.slots.n[slot] += len(d)
	return true
}

// span is how far a datagram reaches in the term: its frames, and when the
// last is a padding frame (its header travels alone or after data frames,
// as the sender scans it), to that frame's end.
func span(d []byte) int64 {
	o := 0
	for o+protocol.DataHeaderLength <= len(d) {
		fl := int(int32(binary.LittleEndian.Uint32(d[o:])))
		if fl <= 0 {
			break
		}
		if protocol.FrameType(binary.LittleEndian.Uint16(d[o+6:])) == protocol.TypePad && o+protocol.DataHeaderLength >= len(d) {
			// the last frame: its header travels, its length reaches on
			// (a 32-byte one among data frames is whole in d)
			return int64(o + protocol.Align(fl, logbuffer.FrameAlignment))
		}
		o += protocol.Align(fl, logbuffer.FrameAlignment)
	}
	return int64(protocol.Align(len(d), logbuffer.FrameAlignment))
}

// rewriteChunk returns the frames of the publication's log from g.next
// on, whole, up to the mtu and short of pos (or one padding frame's
// header), to write again; nil when d is in no log the driver registered
// here or the log holds no frame there.
func (t *rcTransport) rewriteChunk(g *wGrant, d []byte, pos int64) []byte {
	tl := int(g.termLength)
	var log []byte
	for _, r := range t.regs {
		if len(r.b) >= logbuffer.PartitionCount*tl && shm.Within(r.b, d) {
			log = r.b
			break
		}
	}
	if log == nil {
		return nil
	}
	idx := int((g.next >> g.shift) % logbuffer.PartitionCount)
	term := log[idx*tl : (idx+1)*tl]
	start := int(g.next & int64(tl-1))
	termID := g.initialTermID + int32(g.next>>g.shift)
	o := start
	for o < tl && g.next+int64(o-start) < pos {
		fl := int(shm.LoadInt32(term, o))
		if fl < protocol.DataHeaderLength || int32(binary.LittleEndian.Uint32(term[o+20:])) != termID {
			break // not this term's frame (the log moved on): the receiver's NAK asks
		}
		if protocol.FrameType(binary.LittleEndian.Uint16(term[o+6:])) == protocol.TypePad {
			if o == start {
				return term[o : o+protocol.DataHeaderLength]
			}
			break
		}
		a := protocol.Align(fl, logbuffer.FrameAlignment)
		if o+a-start > t.mtu || o+a > tl {
			break
		}
		o += a
	}
	if o == start {
		return nil
	}
	return term[start:o]
}
