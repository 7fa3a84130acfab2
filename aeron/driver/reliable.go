package driver

import (
	"strconv"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/shm"
)

// sysLossGapFills is the "Loss gap fills" system counter
// (AERON_SYSTEM_COUNTER_LOSS_GAP_FILLS).
const sysLossGapFills = 23

// setReliable takes reliable= or the driver's AERON_RELIABLE_STREAM for a
// new receive endpoint.
func (e *receiveEndpoint) setReliable(u *uri.ChannelURI, n NetworkConfig) {
	e.reliable = n.ReliableStream
	if v, ok := u.Bool(uri.KeyReliable); ok {
		e.reliable = v
	}
}

// checkReliable refuses a subscription whose reliable= (or a gtag= or
// group= it gives) differs from the endpoint it would share, as the C
// driver's "option conflicts with existing subscription" does: one image
// serves both.
func (e *receiveEndpoint) checkReliable(u *uri.ChannelURI, n NetworkConfig, channel string) error {
	want := n.ReliableStream
	if v, ok := u.Bool(uri.KeyReliable); ok {
		want = v
	}
	if want != e.reliable {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: option conflicts with existing subscription: reliable=%t, existing reliable=%t", channel, want, e.reliable)
	}
	// gtag and group are the endpoint's too
	if v, ok := u.Get(uri.KeyGroupTag); ok && (!e.hasGroupTag || strconv.FormatInt(e.groupTag, 10) != v) {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: option conflicts with existing subscription: gtag=%s", channel, v)
	}
	if v, ok := u.Get(uri.KeyGroup); ok && groupParam(u) != e.group {
		return fail(cnc.ErrorCodeInvalidChannel, "%s: option conflicts with existing subscription: group=%s", channel, v)
	}
	return nil
}

// fillGap is the unreliable image's answer to a gap whose delay expired
// (aeron_term_gap_filler_try_fill_gap): a PAD frame over the whole gap,
// unless a frame arrived into it meanwhile. Its length is written last,
// so the subscriber sees either nothing or the whole pad. Receiver.
func (im *publicationImage) fillGap(r *receiver, termID, termOffset, length int32) bool {
	term := im.log.Term(logbuffer.IndexByTerm(im.initialTermID, termID))
	off, n := int(termOffset), int(length)
	if n < protocol.DataHeaderLength || off+n > len(term) {
		return false
	}
	for o := off + n - logbuffer.FrameAlignment; o >= off; o -= logbuffer.FrameAlignment {
		if shm.LoadInt32(term, o) != 0 {
			return false
		}
	}
	h := protocol.DataHeader{FrameHeader: protocol.FrameHeader{Type: protocol.TypePad, Flags: protocol.FlagsUnfragmented},
		TermOffset: termOffset, SessionID: im.sessionID, StreamID: im.streamID, TermID: termID}
	var hdr [protocol.DataHeaderLength]byte
	_, _ = h.Encode(hdr[:])
	copy(term[off+4:off+protocol.DataHeaderLength], hdr[4:])
	shm.StoreInt32(term, off, length)
	r.sys[sysLossGapFills].Add(1)
	return true
}
