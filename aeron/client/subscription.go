package client

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// FragmentHandler receives each fragment: the payload aliases the log and
// is only valid during the call.
type FragmentHandler = logbuffer.FragmentHandler

// Header describes the frame being delivered.
type Header = logbuffer.Header

// Action is what a ControlledFragmentHandler tells ControlledPoll to do
// (ControlledFragmentHandler.Action). A plain value.
type Action int

// Actions.
const (
	ActionAbort    Action = iota + 1 // do not consume this fragment; stop
	ActionBreak                      // consume it and stop
	ActionCommit                     // consume it and commit the position now
	ActionContinue                   // consume it and go on
)

// ControlledFragmentHandler is a FragmentHandler that steers the poll.
type ControlledFragmentHandler func(payload []byte, header *Header) Action

// Subscription receives the images of a channel and stream
// (aeron_subscription_t). Poll and ControlledPoll must be called from one
// goroutine at a time; the image list is updated by the client conductor
// and read without locks (copy on write). Poll does not allocate.
type Subscription struct {
	client         *Client
	registrationID int64
	streamID       int32
	channel        string
	// the rcv-channel counter of the receive endpoint, -1 when none (IPC, spies)
	channelStatusID int32
	images          atomic.Pointer[[]*Image]
	next            int
	closed          atomic.Bool
	// per-subscription image handlers (AddSubscriptionWithHandlers); set
	// before the subscription is published, read on the conductor goroutine
	onAvailable, onUnavailable func(*Image)
}

func newSubscription(c *Client, reg int64, streamID int32, channel string) *Subscription {
	s := &Subscription{client: c, registrationID: reg, streamID: streamID, channel: channel, channelStatusID: -1}
	s.images.Store(&[]*Image{})
	return s
}

// RegistrationID identifies the subscription to the driver.
func (s *Subscription) RegistrationID() int64 { return s.registrationID }

// StreamID is the stream id.
func (s *Subscription) StreamID() int32 { return s.streamID }

// Channel is the channel as added.
func (s *Subscription) Channel() string { return s.channel }

// Images is the current list of images (do not modify it).
func (s *Subscription) Images() []*Image { return *s.images.Load() }

// ImageCount is the number of images.
func (s *Subscription) ImageCount() int { return len(*s.images.Load()) }

// IsConnected reports whether the subscription has an image.
func (s *Subscription) IsConnected() bool { return s.ImageCount() > 0 }

// IsClosed reports whether the subscription was closed.
func (s *Subscription) IsClosed() bool { return s.closed.Load() }

func (s *Subscription) addImage(img *Image) {
	old := *s.images.Load()
	imgs := make([]*Image, len(old), len(old)+1)
	copy(imgs, old)
	imgs = append(imgs, img)
	s.images.Store(&imgs)
}

func (s *Subscription) removeImage(correlationID int64) *Image {
	old := *s.images.Load()
	for i, img := range old {
		if img.correlationID == correlationID {
			imgs := make([]*Image, 0, len(old)-1)
			imgs = append(append(imgs, old[:i]...), old[i+1:]...)
			s.images.Store(&imgs)
			return img
		}
	}
	return nil
}

// Poll delivers up to fragmentLimit fragments from the images, fairly
// (starting with a different image each call), and returns how many.
func (s *Subscription) Poll(handler FragmentHandler, fragmentLimit int) int {
	if s.closed.Load() {
		return 0
	}
	imgs := *s.images.Load()
	n := len(imgs)
	if n == 1 { // the common case, without the divisions of the fair start
		return imgs[0].Poll(handler, fragmentLimit)
	}
	if n == 0 {
		return 0
	}
	start := s.next % n
	s.next = start + 1
	fragments := 0
	for i := 0; i < n && fragments < fragmentLimit; i++ {
		fragments += imgs[(start+i)%n].Poll(handler, fragmentLimit-fragments)
	}
	return fragments
}

// ControlledPoll is Poll with a handler that can abort, break or commit.
func (s *Subscription) ControlledPoll(handler ControlledFragmentHandler, fragmentLimit int) int {
	if s.closed.Load() {
		return 0
	}
	imgs := *s.images.Load()
	n := len(imgs)
	if n == 0 {
		return 0
	}
	start := s.next % n
	s.next = start + 1
	fragments := 0
	for i := 0; i < n && fragments < fragmentLimit; i++ {
		fragments += imgs[(start+i)%n].ControlledPoll(handler, fragmentLimit-fragments)
	}
	return fragments
}

// Close removes the subscription; its images stay mapped for the
// resource linger.
func (s *Subscription) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	c := s.client
	err := c.remove(cnc.CmdRemoveSubscription, s.registrationID)
	c.mu.Lock()
	delete(c.subs, s.registrationID)
	for _, img := range *s.images.Load() {
		img.closed.Store(true)
		c.linger(img.log)
	}
	s.images.Store(&[]*Image{})
	c.mu.Unlock()
	return err
}

// Image is one publisher's stream as seen by a subscription
// (aeron_image_t). Poll from one goroutine at a time.
type Image struct {
	subscription        *Subscription
	correlationID       int64
	sessionID           int32
	sourceIdentity      string
	log                 *logbuffer.LogBuffer
	subPos              *atomic.Int64
	joinPosition        int64
	termLength          int64
	positionBitsToShift int
	header              logbuffer.Header
	closed              atomic.Bool
	// revoked: the log said the publication was revoked when the image closed
	revoked atomic.Bool
}

func newImage(c *Client, s *Subscription, m cnc.ImageReady) (*Image, error) {
	log, err := logbuffer.Open(m.LogFile, true)
	if err != nil {
		return nil, fmt.Errorf("aeron client: map image log: %w", err)
	}
	c.preTouchLocked(log)
	subPos, err := c.counter(m.SubscriberPositionID)
	if err != nil {
		log.Close()
		return nil, err
	}
	tl := log.TermLength()
	img := &Image{subscription: s, correlationID: m.CorrelationID, sessionID: m.SessionID, sourceIdentity: m.SourceIdentity,
		log: log, subPos: subPos,
		termLength: int64(tl), positionBitsToShift: logbuffer.PositionBitsToShift(tl),
		header: logbuffer.NewHeader(log.Metadata().InitialTermID(), tl)}
	img.joinPosition = img.subPos.Load()
	return img, nil
}

// CorrelationID identifies the image.
func (img *Image) CorrelationID() int64 { return img.correlationID }

// SessionID is the publisher's session.
func (img *Image) SessionID() int32 { return img.sessionID }

// SourceIdentity is where the stream comes from ("aeron:ipc" or an address).
func (img *Image) SourceIdentity() string { return img.sourceIdentity }

// Subscription is the subscription the image belongs to.
func (img *Image) Subscription() *Subscription { return img.subscription }

// JoinPosition is where this subscriber started.
func (img *Image) JoinPosition() int64 { return img.joinPosition }

// Position is the subscriber position.
func (img *Image) Position() int64 { return img.subPos.Load() }

// IsClosed reports whether the image went away.
func (img *Image) IsClosed() bool { return img.closed.Load() }

// IsEndOfStream reports whether the subscriber consumed the whole stream
// of a publication that ended.
func (img *Image) IsEndOfStream() bool {
	return !img.closed.Load() && img.subPos.Load() >= img.log.Metadata().EndOfStreamPosition()
}

// IsPublicationRevoked reports whether the image's publication was
// revoked (aeron_image_is_publication_revoked): its stream ended without
// the rest being delivered.
// Safe to call from any goroutine, also once the image is closed.
func (img *Image) IsPublicationRevoked() bool {
	if img.closed.Load() {
		return img.revoked.Load()
	}
	return img.log.Metadata().IsPublicationRevoked()
}

// Poll delivers up to fragmentLimit fragments (aeron_image_poll).
func (img *Image) Poll(handler FragmentHandler, fragmentLimit int) int {
	if img.closed.Load() {
		return 0
	}
	position := img.subPos.Load()
	termOffset := int32(position & (img.termLength - 1))
	term := img.log.Term(logbuffer.IndexByPosition(position, img.positionBitsToShift))
	n, newOffset, _ := logbuffer.Read(term, termOffset, handler, fragmentLimit, &img.header)
	if newOffset > termOffset {
		shm.StoreRelease(img.subPos, position+int64(newOffset-termOffset))
	}
	return n
}

// ControlledPoll delivers fragments to a handler that can abort, break or
// commit (aeron_image_controlled_poll).
func (img *Image) ControlledPoll(handler ControlledFragmentHandler, fragmentLimit int) int {
	if img.closed.Load() {
		return 0
	}
	initialPosition := img.subPos.Load()
	initialOffset := int32(initialPosition & (img.termLength - 1))
	term := img.log.Term(logbuffer.IndexByPosition(initialPosition, img.positionBitsToShift))
	capacity := int32(len(term))
	offset := initialOffset
	position := initialPosition
	fragments := 0
	for fragments < fragmentLimit && offset < capacity {
		length := logbuffer.FrameLengthVolatile(term, offset)
		if length <= 0 || length > capacity-offset {
			break
		}
		frameOffset := offset
		aligned := protocol.AlignedFrameLength(length)
		offset += aligned
		if logbuffer.IsPaddingFrame(term, frameOffset) {
			continue
		}
		img.header.Set(term, frameOffset)
		action := handler(term[frameOffset+protocol.DataHeaderLength:frameOffset+length], &img.header)
		if action == ActionAbort {
			offset -= aligned
			break
		}
		fragments++
		if action == ActionBreak {
			break
		}
		if action == ActionCommit {
			position = initialPosition + int64(offset-initialOffset)
			img.subPos.Store(position)
		}
	}
	if p := initialPosition + int64(offset-initialOffset); p > position {
		img.subPos.Store(p)
	}
	return fragments
}

// reassembly keeps one buffer per session for messages that arrive in
// fragments.
type reassembly map[int32]*[]byte

// add takes one fragment of a fragmented message (not an unfragmented
// one). It returns the buffer holding the message so far, the buffer's
// length before this fragment, and whether this fragment ended a message
// whose beginning is in the buffer. A middle or end without its beginning
// (a subscriber that joined mid-message) is dropped: nil, 0, false.
func (r reassembly) add(payload []byte, h *Header) (buf *[]byte, before int, end bool) {
	flags := h.Flags()
	sid := h.SessionID()
	buf = r[sid]
	if flags&protocol.FlagBegin != 0 {
		if buf == nil {
			b := make([]byte, 0, max(len(payload)*4, 4096))
			buf = &b
			r[sid] = buf
		}
		*buf = append((*buf)[:0], payload...)
		return buf, 0, false
	}
	if buf == nil || len(*buf) == 0 {
		return nil, 0, false
	}
	before = len(*buf)
	*buf = append(*buf, payload...)
	return buf, before, flags&protocol.FlagEnd != 0
}

// FragmentAssembler joins fragmented messages (B … E) before handing them
// to the delegate (aeron_fragment_assembler_t). One per subscription
// goroutine; it buffers per session and allocates only when a session's
// buffer must grow.
type FragmentAssembler struct {
	delegate FragmentHandler
	buffers  reassembly
	handler  FragmentHandler
}

// NewFragmentAssembler wraps delegate.
func NewFragmentAssembler(delegate FragmentHandler) *FragmentAssembler {
	a := &FragmentAssembler{delegate: delegate, buffers: reassembly{}}
	a.handler = a.onFragment
	return a
}

// Handler is the handler to pass to Poll (bound once, so Poll does not
// allocate).
func (a *FragmentAssembler) Handler() FragmentHandler { return a.handler }

func (a *FragmentAssembler) onFragment(payload []byte, h *Header) {
	if h.Flags()&protocol.FlagsUnfragmented == protocol.FlagsUnfragmented {
		a.delegate(payload, h)
		return
	}
	if buf, _, end := a.buffers.add(payload, h); end {
		a.delegate(*buf, h)
		*buf = (*buf)[:0]
	}
}

// ControlledFragmentAssembler is FragmentAssembler for ControlledPoll: when
// the delegate aborts a whole message, its last fragment is not consumed
// and the message is offered again on the next poll.
type ControlledFragmentAssembler struct {
	delegate ControlledFragmentHandler
	buffers  reassembly
	handler  ControlledFragmentHandler
}

// NewControlledFragmentAssembler wraps delegate.
func NewControlledFragmentAssembler(delegate ControlledFragmentHandler) *ControlledFragmentAssembler {
	a := &ControlledFragmentAssembler{delegate: delegate, buffers: reassembly{}}
	a.handler = a.onFragment
	return a
}

// Handler is the handler to pass to ControlledPoll.
func (a *ControlledFragmentAssembler) Handler() ControlledFragmentHandler { return a.handler }

func (a *ControlledFragmentAssembler) onFragment(payload []byte, h *Header) Action {
	if h.Flags()&protocol.FlagsUnfragmented == protocol.FlagsUnfragmented {
		return a.delegate(payload, h)
	}
	buf, before, end := a.buffers.add(payload, h)
	if !end {
		return ActionContinue
	}
	action := a.delegate(*buf, h)
	if action == ActionAbort {
		*buf = (*buf)[:before]
		return ActionAbort
	}
	*buf = (*buf)[:0]
	return action
}

// AddDestination adds a receive destination to a subscription whose
// channel has control-mode=manual (a multi-destination subscription), and
// waits for the driver (Subscription.addDestination). Other channels get
// the driver's error.
func (s *Subscription) AddDestination(ctx context.Context, endpointChannel string) error {
	return s.client.destination(ctx, cnc.CmdAddRcvDestination, s.registrationID, endpointChannel)
}

// RemoveDestination removes a receive destination.
func (s *Subscription) RemoveDestination(ctx context.Context, endpointChannel string) error {
	return s.client.destination(ctx, cnc.CmdRemoveRcvDestination, s.registrationID, endpointChannel)
}

// ChannelStatusID is the id of the rcv-channel counter of the
// subscription's receive endpoint, or -1 where the driver has none (IPC,
// spies), as Java's Subscription.channelStatusId.
func (s *Subscription) ChannelStatusID() int32 { return s.channelStatusID }

// ChannelStatus reads the receive endpoint's status, as
// Publication.ChannelStatus.
func (s *Subscription) ChannelStatus() int64 { return s.client.channelStatus(s.channelStatusID) }

// Reject asks the driver to reject this network image (REJECT_IMAGE,
// Java's Image.reject): it stops taking the publication's data and
// answers its sender with ERR frames carrying reason (at most 1023
// bytes), so the publication's driver tells its clients
// (Options.OnPublicationError); the image then ends at its liveness
// timeout. Safe for concurrent use.
func (img *Image) Reject(ctx context.Context, reason string) error {
	c := img.subscription.client
	_, err := c.command(ctx, cnc.CmdRejectImage, 0, "", func(dst []byte, corr int64) []byte {
		return cnc.AppendRejectImageCommand(dst, cnc.RejectImageCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr},
			ImageCorrelationID: img.correlationID, Position: img.Position(), Reason: reason})
	})
	return err
}
