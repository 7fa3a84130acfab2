package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

var le = binary.LittleEndian

// Offer and TryClaim results below zero (aeronc.h AERON_PUBLICATION_*).
const (
	NotConnected        int64 = -1 // no subscriber is connected
	BackPressured       int64 = -2 // the slowest subscriber is a window behind
	AdminAction         int64 = -3 // the log rotated under the call: retry
	Closed              int64 = -4 // the publication is closed
	MaxPositionExceeded int64 = -5 // the stream reached its maximum position
	PublicationError    int64 = -6 // the message is longer than MaxMessageLength (or the claim than MaxPayloadLength)
)

// ResultString names an Offer/TryClaim result.
func ResultString(r int64) string {
	switch r {
	case NotConnected:
		return "NOT_CONNECTED"
	case BackPressured:
		return "BACK_PRESSURED"
	case AdminAction:
		return "ADMIN_ACTION"
	case Closed:
		return "CLOSED"
	case MaxPositionExceeded:
		return "MAX_POSITION_EXCEEDED"
	case PublicationError:
		return "ERROR"
	}
	if r >= 0 {
		return fmt.Sprintf("position %d", r)
	}
	return fmt.Sprintf("unknown result %d", r)
}

// BufferClaim is a frame claimed with TryClaim: write the payload into
// Buffer(), then Commit (or Abort). Owned by the goroutine that claimed.
type BufferClaim = logbuffer.BufferClaim

// Publication appends messages to a stream (aeron_publication_t /
// aeron_exclusive_publication_t). A concurrent publication (AddPublication)
// may be offered to from any number of goroutines and processes at once;
// an exclusive one (AddExclusivePublication) from one goroutine at a time.
// Offer and TryClaim do not allocate.
type Publication struct {
	client                 *Client
	registrationID         int64
	originalRegistrationID int64
	streamID, sessionID    int32
	channel                string
	exclusive              bool
	channelStatusID        int32

	log                 *logbuffer.LogBuffer
	meta                *logbuffer.Metadata
	appenders           [logbuffer.PartitionCount]*logbuffer.TermAppender
	hw                  logbuffer.HeaderWriter
	pubLmt              *atomic.Int64
	initialTermID       int32
	positionBitsToShift int
	termLength          int64
	maxPayload          int
	maxMessage          int
	maxPossiblePosition int64
	closed              atomic.Bool

	// Exclusive publications keep the tail themselves
	// (ExclusivePublication): only the writing goroutine touches these.
	exAppenders  [logbuffer.PartitionCount]*logbuffer.ExclusiveTermAppender
	exTermID     int32
	exTermOffset int32
	exTermCount  int32
	exIndex      int
	exTermBegin  int64
}

func newPublication(c *Client, r cnc.PublicationReady, channel string, exclusive bool) (*Publication, error) {
	log, err := logbuffer.Open(r.LogFile, true)
	if err != nil {
		return nil, fmt.Errorf("aeron client: map publication log: %w", err)
	}
	c.preTouchLocked(log)
	m := log.Metadata()
	hw, err := logbuffer.NewHeaderWriter(m.DefaultFrameHeader())
	if err != nil {
		log.Close()
		return nil, err
	}
	pubLmt, err := c.counter(r.PublicationLimitCounterID)
	if err != nil {
		log.Close()
		return nil, err
	}
	termLength := int64(log.TermLength())
	p := &Publication{client: c, registrationID: r.CorrelationID, originalRegistrationID: r.RegistrationID,
		streamID: r.StreamID, sessionID: r.SessionID, channel: channel, exclusive: exclusive, channelStatusID: r.ChannelStatusIndicatorID,
		log: log, meta: m, hw: hw,
		pubLmt:        pubLmt,
		initialTermID: m.InitialTermID(), positionBitsToShift: logbuffer.PositionBitsToShift(int32(termLength)),
		termLength: termLength, maxPayload: int(m.MTULength()) - 32,
		maxMessage:          min(int(termLength/8), 16<<20),
		maxPossiblePosition: termLength << 31}
	for i := range p.appenders {
		p.appenders[i] = logbuffer.NewTermAppender(log, i)
		p.exAppenders[i] = logbuffer.NewExclusiveTermAppender(log, i)
	}
	if exclusive {
		p.exTermCount = m.ActiveTermCount()
		p.exIndex = logbuffer.IndexByTermCount(int64(p.exTermCount))
		raw := m.RawTailVolatile(p.exIndex)
		p.exTermID = logbuffer.TermID(raw)
		p.exTermOffset = logbuffer.TermOffset(raw, int32(termLength))
		p.exTermBegin = logbuffer.ComputeTermBeginPosition(p.exTermID, p.positionBitsToShift, p.initialTermID)
	}
	return p, nil
}

// RegistrationID is the id of this client's registration (remove with it).
func (p *Publication) RegistrationID() int64 { return p.registrationID }

// ChannelStatusID is the id of the snd-channel counter of the
// publication's send endpoint, or -1 where the driver has none (IPC), as
// Java's Publication.channelStatusId.
func (p *Publication) ChannelStatusID() int32 { return p.channelStatusID }

// ChannelStatus reads the send endpoint's status: ChannelStatusActive
// once it is up, ChannelStatusErrored when it failed, or, with no status
// counter (IPC), ChannelStatusActive as Java's Publication.channelStatus.
func (p *Publication) ChannelStatus() int64 { return p.client.channelStatus(p.channelStatusID) }

// OriginalRegistrationID is the id of the publication shared by all adders.
func (p *Publication) OriginalRegistrationID() int64 { return p.originalRegistrationID }

// SessionID, StreamID and Channel identify the stream.
func (p *Publication) SessionID() int32 { return p.sessionID }

// StreamID is the stream id.
func (p *Publication) StreamID() int32 { return p.streamID }

// Channel is the channel as added.
func (p *Publication) Channel() string { return p.channel }

// MaxPayloadLength is the largest message that fits one frame (MTU − 32).
func (p *Publication) MaxPayloadLength() int { return p.maxPayload }

// MaxMessageLength is the largest message Offer accepts (term/8, ≤ 16 MiB).
func (p *Publication) MaxMessageLength() int { return p.maxMessage }

// TermBufferLength is the log's term length.
func (p *Publication) TermBufferLength() int { return int(p.termLength) }

// IsConnected reports whether a subscriber is connected.
func (p *Publication) IsConnected() bool { return !p.closed.Load() && p.meta.IsConnected() }

// IsClosed reports whether the publication was closed.
func (p *Publication) IsClosed() bool { return p.closed.Load() }

// PublicationLimit is the position the driver lets the publication reach.
func (p *Publication) PublicationLimit() int64 { return p.pubLmt.Load() }

// Position is the current producer position.
func (p *Publication) Position() int64 {
	raw := p.meta.RawTailActive()
	off := min(raw&0xFFFF_FFFF, p.termLength)
	return logbuffer.ComputeTermBeginPosition(logbuffer.TermID(raw), p.positionBitsToShift, p.initialTermID) + off
}

// Offer appends msg (fragmented when longer than MaxPayloadLength) and
// returns the new stream position, or one of the negative results
// (aeron_publication_offer).
func (p *Publication) Offer(msg []byte) int64 {
	if p.closed.Load() {
		return Closed
	}
	if p.exclusive {
		return p.offerExclusive(msg)
	}
	limit := p.pubLmt.Load()
	termCount := p.meta.ActiveTermCount()
	idx := logbuffer.IndexByTermCount(int64(termCount))
	raw := p.meta.RawTailVolatile(idx)
	termOffset := raw & 0xFFFF_FFFF
	termID := logbuffer.TermID(raw)
	if termCount != termID-p.initialTermID {
		return AdminAction
	}
	position := logbuffer.ComputeTermBeginPosition(termID, p.positionBitsToShift, p.initialTermID) + termOffset
	if position >= limit {
		return p.backPressureStatus(position, len(msg))
	}
	var resulting int32
	var err error
	if len(msg) <= p.maxPayload {
		resulting, err = p.appenders[idx].AppendUnfragmentedMessage(&p.hw, msg, nil, termID)
	} else {
		if len(msg) > p.maxMessage {
			return PublicationError
		}
		resulting, err = p.appenders[idx].AppendFragmentedMessage(&p.hw, msg, p.maxPayload, nil, termID)
	}
	if err != nil {
		return AdminAction // the term rotated between reading the tail and claiming
	}
	return p.newPosition(termCount, termID, position-termOffset, resulting)
}

// TryClaim claims a frame for length bytes (at most MaxPayloadLength) to be
// written in place through claim, then committed (aeron_publication_try_claim).
func (p *Publication) TryClaim(length int, claim *BufferClaim) int64 {
	if p.closed.Load() {
		return Closed
	}
	if length > p.maxPayload || length < 0 {
		return PublicationError
	}
	if p.exclusive {
		position := p.exTermBegin + int64(p.exTermOffset)
		if position >= p.pubLmt.Load() {
			return p.backPressureStatus(position, length)
		}
		return p.exNewPosition(p.exAppenders[p.exIndex].Claim(&p.hw, p.exTermID, p.exTermOffset, length, claim))
	}
	limit := p.pubLmt.Load()
	termCount := p.meta.ActiveTermCount()
	idx := logbuffer.IndexByTermCount(int64(termCount))
	raw := p.meta.RawTailVolatile(idx)
	termOffset := raw & 0xFFFF_FFFF
	termID := logbuffer.TermID(raw)
	if termCount != termID-p.initialTermID {
		return AdminAction
	}
	position := logbuffer.ComputeTermBeginPosition(termID, p.positionBitsToShift, p.initialTermID) + termOffset
	if position >= limit {
		return p.backPressureStatus(position, length)
	}
	resulting, err := p.appenders[idx].Claim(&p.hw, length, claim, termID)
	if err != nil {
		return AdminAction
	}
	return p.newPosition(termCount, termID, position-termOffset, resulting)
}

// offerExclusive is ExclusivePublication.offer: the term offset is ours,
// the tail is published with an ordered store.
func (p *Publication) offerExclusive(msg []byte) int64 {
	position := p.exTermBegin + int64(p.exTermOffset)
	if position >= p.pubLmt.Load() {
		return p.backPressureStatus(position, len(msg))
	}
	a := p.exAppenders[p.exIndex]
	if len(msg) <= p.maxPayload {
		return p.exNewPosition(a.AppendUnfragmentedMessage(&p.hw, p.exTermID, p.exTermOffset, msg))
	}
	if len(msg) > p.maxMessage {
		return PublicationError
	}
	r, err := a.AppendFragmentedMessage(&p.hw, p.exTermID, p.exTermOffset, msg, p.maxPayload)
	if err != nil {
		return PublicationError
	}
	return p.exNewPosition(r)
}

// exNewPosition mirrors ExclusivePublication.newPosition and rotateTerm.
func (p *Publication) exNewPosition(resulting int32) int64 {
	if resulting > 0 {
		p.exTermOffset = resulting
		return p.exTermBegin + int64(resulting)
	}
	if p.exTermBegin+p.termLength >= p.maxPossiblePosition {
		return MaxPositionExceeded
	}
	p.exTermCount++
	p.exIndex = logbuffer.IndexByTermCount(int64(p.exTermCount))
	p.exTermBegin += p.termLength
	p.exTermOffset = 0
	p.exTermID++
	p.meta.InitialiseTailWithTermID(p.exIndex, p.exTermID)
	p.meta.SetActiveTermCountOrdered(p.exTermCount)
	return AdminAction
}

func (p *Publication) newPosition(termCount, termID int32, termBegin int64, resulting int32) int64 {
	if resulting > 0 {
		return termBegin + int64(resulting)
	}
	// The claim ran past the term: its end is beyond termBegin+termLength
	// (aeron_publication_handle_end_of_log_condition).
	if termBegin+p.termLength >= p.maxPossiblePosition {
		return MaxPositionExceeded
	}
	p.meta.RotateLog(termCount, termID)
	return AdminAction
}

func (p *Publication) backPressureStatus(position int64, length int) int64 {
	if position+int64(length) >= p.maxPossiblePosition {
		return MaxPositionExceeded
	}
	if p.meta.IsConnected() {
		return BackPressured
	}
	return NotConnected
}

// Close removes this registration; the log stays mapped for the resource
// linger so that a concurrent Offer cannot touch unmapped memory.
func (p *Publication) Close() error { return p.close(0) }

// Revoke closes the publication as Close does and revokes it
// (REMOVE_PUBLICATION with the revoke flag; C's
// aeron_exclusive_publication_revoke, Java's Publication.revoke): the
// driver ends it at once, for every client holding it, without draining;
// subscribers lose their image whatever they have not read, and remote
// images see an end of stream flagged REVOKED (Image.IsPublicationRevoked).
func (p *Publication) Revoke() error { return p.close(cnc.RemovePublicationFlagRevoke) }

func (p *Publication) close(flags int64) error {
	if p.closed.Swap(true) {
		return nil
	}
	c := p.client
	err := c.removeWithFlags(cnc.CmdRemovePublication, p.registrationID, flags)
	c.mu.Lock()
	delete(c.pubs, p.registrationID)
	c.linger(p.log)
	c.mu.Unlock()
	return err
}

// AddDestination adds a destination (e.g. "aeron:udp?endpoint=host:port")
// to a publication whose channel has control-mode=manual, and waits for
// the driver (Publication.addDestination; aeron_publication_async_add_destination).
// Other channels get the driver's error.
func (p *Publication) AddDestination(ctx context.Context, endpointChannel string) error {
	return p.client.destination(ctx, cnc.CmdAddDestination, p.originalRegistrationID, endpointChannel)
}

// RemoveDestination removes a destination AddDestination added.
func (p *Publication) RemoveDestination(ctx context.Context, endpointChannel string) error {
	return p.client.destination(ctx, cnc.CmdRemoveDestination, p.originalRegistrationID, endpointChannel)
}
