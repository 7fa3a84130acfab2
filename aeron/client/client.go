package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/internal/shm"
	"github.com/ibgo/ibgo/internal/sys"
)

// Options configure a client. Zero values take Aeron's defaults. A plain
// value, copied by Connect.
type Options struct {
	Dir               string        // Aeron directory; default $AERON_DIR, else the platform default
	DriverTimeout     time.Duration // AERON_DRIVER_TIMEOUT, default 10 s
	KeepaliveInterval time.Duration // default 500 ms
	ResourceLinger    time.Duration // how long closed logs stay mapped, default 3 s
	IdleSleep         time.Duration // client conductor idle, default 1 ms
	ClientName        string        // shown in the client-heartbeat counter label (AERON_CLIENT_NAME)
	// PreTouchMappedMemory takes the page faults of every page of a
	// publication's or image's log when the client maps it, instead of one
	// by one as the stream first reaches each page (each a stall of a
	// round trip: tens of microseconds in a VM). Each page is written
	// once, as Aeron's Java client pre-touches (C's only populates).
	// Mapping a log then takes longer (about half a second for IPC's
	// 3 x 64 MiB terms in this project's VM), on the client conductor,
	// which meanwhile answers no other call. False takes
	// AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY, read as the C client reads it
	// (a value starting with 1, on or true; default off).
	PreTouchMappedMemory bool
	// OnAvailableImage and OnUnavailableImage run on the client's
	// conductor goroutine; they must not block nor add or remove
	// resources of this client.
	OnAvailableImage   func(*Image)
	OnUnavailableImage func(*Image)
	// OnError receives asynchronous errors: driver timeout, client
	// timeout, broadcast buffer overrun. Runs on the conductor goroutine.
	OnError func(error)
	// OnPublicationError receives ON_PUBLICATION_ERROR: a receiver of a
	// network publication (of any client of the driver) rejected its
	// image and sent an ERR frame (Java's publicationErrorFrameHandler).
	// Runs on the conductor goroutine.
	OnPublicationError func(cnc.PublicationError)
	// DriverInvoker, when set, is an embedded media driver in INVOKER
	// threading mode (driver.Driver): the client's conductor goroutine
	// runs its duty cycle (DoWork) before its own, and Connect does while
	// it waits, so the program needs no other loop for the driver. This
	// is the Go form of an Aeron C program calling
	// aeron_driver_main_do_work from its client conductor's loop. The
	// client does not close the driver.
	DriverInvoker DriverInvoker
	// PinConductor puts the client conductor goroutine on an OS thread of
	// its own pinned to ConductorCPU (sched_setaffinity), as the driver's
	// AERON_*_CPU_AFFINITY pin its agents; a refusal goes to OnError and
	// the conductor runs unpinned.
	PinConductor bool
	ConductorCPU int
}

// DriverInvoker runs one duty cycle of an embedded media driver and
// returns the work it did (driver.Driver.DoWork). It must be safe to call
// from the client's conductor goroutine while other goroutines call it.
type DriverInvoker interface {
	DoWork() int
}

// Client is a connection to a media driver through its CnC file (Aeron's
// aeron_t / Aeron). All methods are safe for concurrent use. A background
// goroutine (the client conductor) reads the driver's broadcasts, sends
// keepalives and watches the driver's heartbeat.
type Client struct {
	opts      Options
	cnc       *cnc.File
	rb        *cnc.ManyToOneRingBuffer
	counters  *cnc.CountersReader
	clientID  int64
	valuesBuf []byte

	mu        sync.Mutex // guards everything below and the broadcast receiver
	bc        *cnc.CopyBroadcastReceiver
	onMessage cnc.MessageHandler
	buf       []byte
	pending   map[int64]*pending
	pubs      map[int64]*Publication
	subs      map[int64]*Subscription
	counterz  map[int64]*Counter
	lingering []lingerEntry
	hb        *atomic.Int64
	lastKeep  time.Time
	err       error

	closed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
}

type pending struct {
	kind     int32 // command type id
	streamID int32
	channel  string
	ch       chan result
	// image handlers of a subscription being added
	onAvailable, onUnavailable func(*Image)
}

type result struct {
	obj any
	err error
}

type lingerEntry struct {
	deadline time.Time
	log      *logbuffer.LogBuffer
}

// DefaultDir is $AERON_DIR, else /dev/shm/aeron-<user> (Linux) or
// <tmp>/aeron-<user>, the user as the C client finds it (cnc.Dir, shared
// with the driver and the tools).
func DefaultDir() string { return cnc.Dir() }

// Connect maps the driver's CnC file, waiting up to the driver timeout (or
// until ctx is done) for a driver to start there, and checks that it is
// alive.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir()
	}
	if opts.DriverTimeout <= 0 {
		opts.DriverTimeout = 10 * time.Second
		if v := os.Getenv("AERON_DRIVER_TIMEOUT"); v != "" {
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
				opts.DriverTimeout = time.Duration(ms) * time.Millisecond // the C client reads milliseconds
			}
		}
	}
	if opts.KeepaliveInterval <= 0 {
		opts.KeepaliveInterval = 500 * time.Millisecond
	}
	if opts.ResourceLinger <= 0 {
		opts.ResourceLinger = 3 * time.Second
	}
	if opts.IdleSleep <= 0 {
		opts.IdleSleep = time.Millisecond
	}
	if opts.ClientName == "" {
		opts.ClientName = os.Getenv("AERON_CLIENT_NAME")
	}
	if !opts.PreTouchMappedMemory {
		opts.PreTouchMappedMemory = envBool(os.Getenv("AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY"), false)
	}
	// Reopen on every attempt: a driver starting in a stale directory
	// replaces cnc.dat, and the old file's heartbeat never moves again.
	deadline := time.Now().Add(opts.DriverTimeout)
	var f *cnc.File
	for {
		if opts.DriverInvoker != nil {
			opts.DriverInvoker.DoWork() // its heartbeat, at least
		}
		var err error
		f, err = cnc.OpenFile(cnc.Path(opts.Dir), true)
		if err == nil {
			age := time.Since(time.UnixMilli(f.DriverHeartbeat()))
			if age < opts.DriverTimeout {
				break
			}
			f.Close()
			err = fmt.Errorf("driver heartbeat is %v old", age.Round(time.Millisecond))
		} else if errors.Is(err, cnc.ErrIncompatible) {
			return nil, fmt.Errorf("aeron client: %w", err)
		}
		// Anything else may be a driver still creating the file (missing,
		// empty, version not yet written): retry until the deadline.
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: no live media driver in %s after %v (%v)", ErrDriverTimeout, opts.Dir, opts.DriverTimeout, err)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
	rb, err := f.ToDriver()
	if err != nil {
		f.Close()
		return nil, err
	}
	br, err := cnc.NewBroadcastReceiver(f.ToClientsBuffer())
	if err != nil {
		f.Close()
		return nil, err
	}
	counters, err := f.Counters()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &Client{opts: opts, cnc: f, rb: rb, counters: counters, clientID: rb.NextCorrelationID(), valuesBuf: f.CountersValuesBuffer(),
		bc: cnc.NewCopyBroadcastReceiver(br), pending: map[int64]*pending{}, pubs: map[int64]*Publication{},
		subs: map[int64]*Subscription{}, counterz: map[int64]*Counter{}, stop: make(chan struct{}), done: make(chan struct{})}
	c.onMessage = c.handleResponse
	c.mu.Lock()
	c.sendLocked(cnc.CmdClientKeepalive, c.appendHeader(c.buf[:0], 0))
	c.lastKeep = time.Now()
	c.mu.Unlock()
	go c.run()
	return c, nil
}

// counter returns the value word of counter id, checking the id the
// driver sent against the counters buffer.
func (c *Client) counter(id int32) (*atomic.Int64, error) {
	if id < 0 || id > c.counters.MaxCounterID() {
		return nil, fmt.Errorf("aeron client: driver named counter id %d, outside 0..%d", id, c.counters.MaxCounterID())
	}
	return shm.Int64At(c.valuesBuf, int(id)*cnc.CounterValueLength), nil
}

// Channel endpoint status values, the value of a snd-channel or
// rcv-channel counter (ChannelEndpointStatus in Java).
const (
	ChannelStatusInitializing = 0
	ChannelStatusErrored      = -1
	ChannelStatusActive       = 1
	ChannelStatusClosing      = 2
)

// usesChannelStatus: one of the client's publications or subscriptions
// is on the channel endpoint with status counter id.
func (c *Client) usesChannelStatus(id int32) bool {
	for _, p := range c.pubs {
		if p.channelStatusID == id {
			return true
		}
	}
	for _, s := range c.subs {
		if s.channelStatusID == id {
			return true
		}
	}
	return false
}

// hasPublication: one of the client's publications is the driver's
// publication regID.
func (c *Client) hasPublication(regID int64) bool {
	for _, p := range c.pubs {
		if p.originalRegistrationID == regID {
			return true
		}
	}
	return false
}

// channelStatus reads a channel status counter; without one the channel
// counts as active (Java's ChannelEndpointStatus.NO_ID_ALLOCATED).
func (c *Client) channelStatus(id int32) int64 {
	if id < 0 || id > c.counters.MaxCounterID() {
		return ChannelStatusActive
	}
	return c.counters.CounterValue(id)
}

// ClientID is the id the driver knows this client by.
func (c *Client) ClientID() int64 { return c.clientID }

// Dir is the Aeron directory.
func (c *Client) Dir() string { return c.opts.Dir }

// CounterValue reads any counter of the driver by id.
func (c *Client) CounterValue(id int32) int64 { return c.counters.CounterValue(id) }

// Counters is a reader over the driver's counters.
func (c *Client) Counters() *cnc.CountersReader { return c.counters }

// Err is why the client stopped working (driver or client timeout), or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) appendHeader(dst []byte, correlationID int64) []byte {
	dst = le.AppendUint64(dst, uint64(c.clientID))
	return le.AppendUint64(dst, uint64(correlationID))
}

func (c *Client) sendLocked(typeID int32, msg []byte) error {
	c.buf = msg
	if err := c.rb.Write(typeID, msg); err != nil {
		return fmt.Errorf("aeron client: send %s: %w", cnc.MessageName(typeID), err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("aeron client: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// command sends a command and waits for its answer, at most the driver
// timeout, or until ctx is done.
func (c *Client) command(ctx context.Context, kind int32, streamID int32, channel string, encode func(dst []byte, corr int64) []byte) (any, error) {
	return c.commandWith(ctx, &pending{kind: kind, streamID: streamID, channel: channel}, encode)
}

// commandWith sends a command whose pending entry p the caller filled in.
func (c *Client) commandWith(ctx context.Context, p *pending, encode func(dst []byte, corr int64) []byte) (any, error) {
	kind := p.kind
	p.ch = make(chan result, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	if c.closed.Load() {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	corr := c.rb.NextCorrelationID()
	c.pending[corr] = p
	if err := c.sendLocked(kind, encode(c.buf[:0], corr)); err != nil {
		delete(c.pending, corr)
		c.mu.Unlock()
		return nil, err
	}
	c.mu.Unlock()
	t := time.NewTimer(c.opts.DriverTimeout)
	defer t.Stop()
	select {
	case r := <-p.ch:
		return r.obj, r.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, corr)
		c.mu.Unlock()
		return nil, fmt.Errorf("aeron client: %s (correlation id %d): %w", cnc.MessageName(kind), corr, ctx.Err())
	case <-t.C:
		c.mu.Lock()
		delete(c.pending, corr)
		c.mu.Unlock()
		return nil, fmt.Errorf("%w to %s (correlation id %d) within %v", ErrResponseTimeout, cnc.MessageName(kind), corr, c.opts.DriverTimeout)
	}
}

func (c *Client) run() {
	defer close(c.done)
	if c.opts.PinConductor {
		err := sys.PinThread(c.opts.ConductorCPU)
		if f := conductorPinned.Load(); f != nil {
			(*f)(c.opts.ConductorCPU)
		}
		if err != nil {
			c.asyncError(fmt.Errorf("client conductor: unable to apply affinity: %w", err))
		}
	}
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		n := 0
		if c.opts.DriverInvoker != nil {
			n = c.opts.DriverInvoker.DoWork()
		}
		c.mu.Lock()
		n += c.doWorkLocked()
		c.mu.Unlock()
		if n == 0 {
			time.Sleep(c.opts.IdleSleep)
		}
	}
}

func (c *Client) doWorkLocked() int {
	if c.err != nil {
		return 0
	}
	work := 0
	for i := 0; i < 16; i++ {
		n, err := c.bc.Receive(c.onMessage)
		if err != nil {
			c.asyncError(fmt.Errorf("aeron client: driver broadcasts: %w", err))
			break
		}
		if n == 0 {
			break
		}
		work += n
	}
	now := time.Now()
	if age := now.Sub(time.UnixMilli(c.rb.ConsumerHeartbeatTime())); age > c.opts.DriverTimeout {
		c.failLocked(fmt.Errorf("%w: MediaDriver keepalive: age=%v > timeout=%v", ErrDriverTimeout, age.Round(time.Millisecond), c.opts.DriverTimeout))
		return work
	}
	if now.Sub(c.lastKeep) >= c.opts.KeepaliveInterval {
		c.keepaliveLocked(now)
	}
	for len(c.lingering) > 0 && now.After(c.lingering[0].deadline) {
		_ = c.lingering[0].log.Close()
		c.lingering = c.lingering[1:]
	}
	return work
}

// keepaliveLocked tells the driver this client lives: its heartbeat
// counter, or a keepalive command while the driver has made none.
func (c *Client) keepaliveLocked(now time.Time) {
	c.lastKeep = now
	if c.hb == nil {
		if id := c.counters.FindByTypeIDAndRegistrationID(cnc.TypeClientHeartbeatTimestamp, c.clientID); id != cnc.NullCounterID {
			c.hb, _ = c.counter(id)
			c.appendHeartbeatLabel(id)
		}
	}
	if c.hb != nil {
		c.hb.Store(now.UnixMilli())
	} else {
		_ = c.sendLocked(cnc.CmdClientKeepalive, c.appendHeader(c.buf[:0], 0))
	}
}

// preTouchLocked pre-touches a log the conductor has just mapped, when
// the options ask, keeping the client's keepalive going between chunks
// (a large log takes seconds in a VM, and the driver's client liveness
// timeout is 10 s). A failure is reported to OnError and the log is used
// untouched.
func (c *Client) preTouchLocked(log *logbuffer.LogBuffer) {
	if !c.opts.PreTouchMappedMemory {
		return
	}
	err := log.PreTouch(func() {
		if now := time.Now(); now.Sub(c.lastKeep) >= c.opts.KeepaliveInterval {
			c.keepaliveLocked(now)
		}
	})
	if err != nil {
		c.asyncError(fmt.Errorf("aeron client: pre-touch: %w", err))
	}
}

// appendHeartbeatLabel adds " name=… version=… commit=…" to the driver's
// "client-heartbeat: id=N" label, as Aeron clients do (AeronCounters.appendToLabel),
// so AeronStat shows who the client is.
func (c *Client) appendHeartbeatLabel(id int32) {
	meta := c.cnc.CountersMetadataBuffer()
	off := int(id) * cnc.CounterMetadataLength
	const labelLengthOffset, labelOffset = 128, 132
	n := int(shm.LoadInt32(meta, off+labelLengthOffset))
	suffix := " name=" + c.opts.ClientName + " version=" + ClientVersion + " commit=ibgo"
	if n < 0 || n > cnc.MaxLabelLength {
		return
	}
	added := copy(meta[off+labelOffset+n:off+labelOffset+cnc.MaxLabelLength], suffix)
	shm.StoreInt32(meta, off+labelLengthOffset, int32(n+added))
}

// conductorPinned, when set, runs on the pinned conductor's thread right
// after pinning (the tests read the thread's CPUs there).
var conductorPinned atomic.Pointer[func(cpu int)]

// ClientVersion is the Aeron client version ibgo's client reports.
const ClientVersion = "1.48.0"

func (c *Client) asyncError(err error) {
	if c.opts.OnError != nil {
		c.opts.OnError(err)
	}
}

// failLocked stops the client after a driver or client timeout: every
// resource reports closed and waiting commands fail with err.
func (c *Client) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	for corr, p := range c.pending {
		p.ch <- result{err: err}
		delete(c.pending, corr)
	}
	for _, p := range c.pubs {
		p.closed.Store(true)
	}
	for _, s := range c.subs {
		s.closed.Store(true)
	}
	c.asyncError(err)
}

func (c *Client) linger(l *logbuffer.LogBuffer) {
	c.lingering = append(c.lingering, lingerEntry{deadline: time.Now().Add(c.opts.ResourceLinger), log: l})
}

func (c *Client) handleResponse(typeID int32, msg []byte) {
	switch typeID {
	case cnc.RspOnError:
		e, err := cnc.DecodeErrorResponse(msg)
		if err != nil {
			c.asyncError(err)
			return
		}
		if e.Code == cnc.ErrorCodeChannelEndpointError {
			// a channel endpoint failed after its resources were ready:
			// the offending id is its status counter's, not a
			// correlation id (the ChannelStatusID of the publications and
			// subscriptions on it, whose ChannelStatus now reads
			// ChannelStatusErrored); only a client with a resource on it
			// hears of it, as Java's ChannelEndpointException
			if c.usesChannelStatus(int32(e.OffendingCorrelationID)) {
				c.asyncError(&DriverError{Code: ErrorCode(e.Code), Message: e.Message, CorrelationID: e.OffendingCorrelationID})
			}
			return
		}
		if p, ok := c.pending[e.OffendingCorrelationID]; ok {
			delete(c.pending, e.OffendingCorrelationID)
			p.ch <- result{err: &DriverError{Code: ErrorCode(e.Code), Message: e.Message, CorrelationID: e.OffendingCorrelationID}}
		}
	case cnc.RspOnPublicationReady, cnc.RspOnExclusivePublicationReady:
		r, err := cnc.DecodePublicationReady(typeID, msg)
		if err != nil {
			c.asyncError(err)
			return
		}
		p, ok := c.pending[r.CorrelationID]
		if !ok {
			return
		}
		delete(c.pending, r.CorrelationID)
		pub, err := newPublication(c, r, p.channel, typeID == cnc.RspOnExclusivePublicationReady)
		if err == nil {
			c.pubs[r.CorrelationID] = pub
		}
		p.ch <- result{obj: pub, err: err}
	case cnc.RspOnSubscriptionReady:
		corr, statusID, err := cnc.DecodeIDAndCounter(typeID, msg)
		if err != nil {
			c.asyncError(err)
			return
		}
		p, ok := c.pending[corr]
		if !ok {
			return
		}
		delete(c.pending, corr)
		s := newSubscription(c, corr, p.streamID, p.channel)
		s.channelStatusID = statusID
		s.onAvailable, s.onUnavailable = p.onAvailable, p.onUnavailable
		c.subs[corr] = s
		p.ch <- result{obj: s}
	case cnc.RspOnPublicationError:
		pe, err := cnc.DecodePublicationError(msg)
		if err != nil {
			c.asyncError(err)
			return
		}
		if c.opts.OnPublicationError != nil && c.hasPublication(pe.RegistrationID) {
			// only the clients of that publication (Java filters the same way)
			c.opts.OnPublicationError(pe)
		}
	case cnc.RspOnAvailableImage:
		m, err := cnc.DecodeImageReady(msg)
		if err != nil {
			c.asyncError(err)
			return
		}
		s, ok := c.subs[m.SubscriptionRegistrationID]
		if !ok || s.closed.Load() {
			return
		}
		img, err := newImage(c, s, m)
		if err != nil {
			c.asyncError(err)
			return
		}
		s.addImage(img)
		if s.onAvailable != nil {
			s.onAvailable(img)
		} else if c.opts.OnAvailableImage != nil {
			c.opts.OnAvailableImage(img)
		}
	case cnc.RspOnUnavailableImage:
		m, err := cnc.DecodeImageUnavailable(msg)
		if err != nil {
			c.asyncError(err)
			return
		}
		s, ok := c.subs[m.SubscriptionRegistrationID]
		if !ok {
			return
		}
		if img := s.removeImage(m.CorrelationID); img != nil {
			// what the log says, kept: the log is unmapped after the linger
			img.revoked.Store(img.log.Metadata().IsPublicationRevoked())
			img.closed.Store(true)
			c.linger(img.log)
			if s.onUnavailable != nil {
				s.onUnavailable(img)
			} else if c.opts.OnUnavailableImage != nil {
				c.opts.OnUnavailableImage(img)
			}
		}
	case cnc.RspOnOperationSuccess:
		corr, err := cnc.DecodeID(typeID, msg)
		if err != nil {
			return
		}
		if p, ok := c.pending[corr]; ok {
			delete(c.pending, corr)
			p.ch <- result{}
		}
	case cnc.RspOnCounterReady, cnc.RspOnStaticCounter:
		corr, id, err := cnc.DecodeIDAndCounter(typeID, msg)
		if err != nil {
			return
		}
		if corr == c.clientID && typeID == cnc.RspOnCounterReady && c.hb == nil {
			// The driver names this client's heartbeat counter.
			if hb, err := c.counter(id); err == nil {
				c.hb = hb
				c.appendHeartbeatLabel(id)
			}
			return
		}
		if p, ok := c.pending[corr]; ok {
			delete(c.pending, corr)
			v, err := c.counter(id)
			if err != nil {
				p.ch <- result{err: err}
				return
			}
			ctr := &Counter{client: c, registrationID: corr, id: id, value: v, static: typeID == cnc.RspOnStaticCounter}
			if !ctr.static {
				c.counterz[corr] = ctr
			}
			p.ch <- result{obj: ctr}
		}
	case cnc.RspOnUnavailableCounter:
		reg, _, err := cnc.DecodeIDAndCounter(typeID, msg)
		if err == nil {
			if ctr, ok := c.counterz[reg]; ok {
				ctr.closed.Store(true)
				delete(c.counterz, reg)
			}
		}
	case cnc.RspOnClientTimeout:
		id, err := cnc.DecodeID(typeID, msg)
		if err == nil && id == c.clientID {
			c.failLocked(fmt.Errorf("%w: client id %d", ErrClientTimeout, id))
		}
	case cnc.RspOnNextAvailableSessionID:
		corr, v, err := cnc.DecodeIDAndCounter(typeID, msg)
		if err != nil {
			return
		}
		if p, ok := c.pending[corr]; ok {
			delete(c.pending, corr)
			p.ch <- result{obj: v}
		}
	}
}

// AddPublication adds a concurrent publication (shared by every client
// adding the same channel and stream) and waits for the driver.
func (c *Client) AddPublication(ctx context.Context, channel string, streamID int32) (*Publication, error) {
	return c.addPublication(ctx, cnc.CmdAddPublication, channel, streamID)
}

// AddExclusivePublication adds a publication of its own (one writer).
func (c *Client) AddExclusivePublication(ctx context.Context, channel string, streamID int32) (*Publication, error) {
	return c.addPublication(ctx, cnc.CmdAddExclusivePublication, channel, streamID)
}

func (c *Client) addPublication(ctx context.Context, kind int32, channel string, streamID int32) (*Publication, error) {
	obj, err := c.command(ctx, kind, streamID, channel, func(dst []byte, corr int64) []byte {
		return cnc.AppendPublicationCommand(dst, cnc.PublicationCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, StreamID: streamID, Channel: channel})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Publication), nil
}

// AddSubscription adds a subscription and waits for the driver. Images
// arrive afterwards (OnAvailableImage, Subscription.ImageCount).
func (c *Client) AddSubscription(ctx context.Context, channel string, streamID int32) (*Subscription, error) {
	obj, err := c.command(ctx, cnc.CmdAddSubscription, streamID, channel, func(dst []byte, corr int64) []byte {
		return cnc.AppendSubscriptionCommand(dst, cnc.SubscriptionCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, RegistrationCorrelationID: -1, StreamID: streamID, Channel: channel})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Subscription), nil
}

// AddSubscriptionWithHandlers adds a subscription whose images are
// announced to onAvailable and onUnavailable instead of the client-wide
// Options handlers (a nil one falls back to them), as Aeron's
// addSubscription(channel, streamId, availableImageHandler,
// unavailableImageHandler) and aeron_async_add_subscription take them. The
// handlers are attached before the driver answers, so no image of the
// subscription is missed; they run on the client's conductor goroutine
// and must not block nor add or remove resources of this client.
func (c *Client) AddSubscriptionWithHandlers(ctx context.Context, channel string, streamID int32, onAvailable, onUnavailable func(*Image)) (*Subscription, error) {
	p := &pending{kind: cnc.CmdAddSubscription, streamID: streamID, channel: channel, onAvailable: onAvailable, onUnavailable: onUnavailable}
	obj, err := c.commandWith(ctx, p, func(dst []byte, corr int64) []byte {
		return cnc.AppendSubscriptionCommand(dst, cnc.SubscriptionCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, RegistrationCorrelationID: -1, StreamID: streamID, Channel: channel})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Subscription), nil
}

// AddCounter allocates a counter owned by this client.
func (c *Client) AddCounter(ctx context.Context, typeID int32, key []byte, label string) (*Counter, error) {
	obj, err := c.command(ctx, cnc.CmdAddCounter, 0, "", func(dst []byte, corr int64) []byte {
		return cnc.AppendCounterCommand(dst, cnc.CounterCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, TypeID: typeID, Key: key, Label: label})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Counter), nil
}

// AddStaticCounter finds or allocates a counter that outlives clients,
// identified by type and registration id.
func (c *Client) AddStaticCounter(ctx context.Context, typeID int32, key []byte, label string, registrationID int64) (*Counter, error) {
	obj, err := c.command(ctx, cnc.CmdAddStaticCounter, 0, "", func(dst []byte, corr int64) []byte {
		return cnc.AppendCounterCommand(dst, cnc.CounterCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, Static: true, RegistrationID: registrationID, TypeID: typeID, Key: key, Label: label})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Counter), nil
}

// NextAvailableSessionID asks the driver for a session id not in use
// (Aeron 1.53 GET_NEXT_AVAILABLE_SESSION_ID).
func (c *Client) NextAvailableSessionID(ctx context.Context, streamID int32) (int32, error) {
	obj, err := c.command(ctx, cnc.CmdGetNextAvailableSessionID, streamID, "", func(dst []byte, corr int64) []byte {
		return cnc.AppendSessionIDCommand(dst, cnc.SessionIDCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, StreamID: streamID})
	})
	if err != nil {
		return 0, err
	}
	return obj.(int32), nil
}

func (c *Client) remove(kind int32, registrationID int64) error {
	return c.removeWithFlags(kind, registrationID, 0)
}

// removeWithFlags sends a remove command; flags (the revoke flag of
// REMOVE_PUBLICATION) give the 32-byte form.
func (c *Client) removeWithFlags(kind int32, registrationID, flags int64) error {
	_, err := c.command(context.Background(), kind, 0, "", func(dst []byte, corr int64) []byte {
		return cnc.AppendRemoveCommand(dst, cnc.RemoveCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr},
			RegistrationID: registrationID, Flags: flags})
	})
	return err
}

// SendRaw writes a raw command into the to-driver ring buffer; for tests
// of the driver's handling of malformed commands.
func (c *Client) SendRaw(typeID int32, msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendLocked(typeID, append(c.buf[:0], msg...))
}

// Close sends CLIENT_CLOSE (the driver releases everything this client
// held), stops the conductor and unmaps every file. Resources of the
// client must not be used after Close.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.mu.Lock()
	if c.err == nil {
		_ = c.sendLocked(cnc.CmdClientClose, c.appendHeader(c.buf[:0], c.rb.NextCorrelationID()))
	}
	c.mu.Unlock()
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pubs {
		p.closed.Store(true)
		_ = p.log.Close()
	}
	for _, s := range c.subs {
		s.closed.Store(true)
		for _, img := range s.Images() {
			img.closed.Store(true)
			_ = img.log.Close()
		}
	}
	for _, l := range c.lingering {
		_ = l.log.Close()
	}
	c.lingering = nil
	return c.cnc.Close()
}

// RequestDriverTermination asks the driver in dir to terminate, presenting
// token to its termination validator (aeron_context_request_driver_termination;
// Java CommonContext.requestDriverTermination). It needs no connected
// client. The driver does not answer: a request its validator denies is
// ignored, so watch the driver's heartbeat to see the outcome.
func RequestDriverTermination(dir string, token []byte) error {
	f, err := cnc.OpenFile(cnc.Path(dir), true)
	if err != nil {
		return fmt.Errorf("aeron: request driver termination: %w", err)
	}
	defer f.Close()
	rb, err := f.ToDriver()
	if err != nil {
		return fmt.Errorf("aeron: request driver termination: %w", err)
	}
	clientID := rb.NextCorrelationID()
	cmd := cnc.AppendTerminateCommand(nil, cnc.TerminateCommand{
		Correlated: cnc.Correlated{ClientID: clientID, CorrelationID: rb.NextCorrelationID()}, Token: token})
	if err := rb.Write(cnc.CmdTerminateDriver, cmd); err != nil {
		return fmt.Errorf("aeron: request driver termination: %w", err)
	}
	return nil
}

// destination sends one of the four destination commands for the
// resource registered as reg and waits for the driver's answer.
func (c *Client) destination(ctx context.Context, kind int32, reg int64, channel string) error {
	_, err := c.command(ctx, kind, 0, channel, func(dst []byte, corr int64) []byte {
		return cnc.AppendDestinationCommand(dst, cnc.DestinationCommand{Correlated: cnc.Correlated{ClientID: c.clientID, CorrelationID: corr}, RegistrationID: reg, Channel: channel})
	})
	return err
}

// envBool reads a flag as Aeron's aeron_parse_bool does: a value starting
// with 1, on or true is true, one starting with 0, off or false is false,
// anything else (or nothing) is def.
func envBool(v string, def bool) bool {
	switch {
	case strings.HasPrefix(v, "1"), strings.HasPrefix(v, "on"), strings.HasPrefix(v, "true"):
		return true
	case strings.HasPrefix(v, "0"), strings.HasPrefix(v, "off"), strings.HasPrefix(v, "false"):
		return false
	}
	return def
}
