package uverbs

import (
	"context"
	"strconv"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// EventType is an asynchronous event's type (enum ibv_event_type).
type EventType uint32

const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPkeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
	EventWQFatal          EventType = 19
)

var eventNames = [...]string{
	"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained",
	"path migrated", "path migration request error", "local catastrophic error", "port active", "port error",
	"LID change", "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
	"last WQE reached", "client reregistration", "GID table change", "WQ fatal",
}

// String is ibv_event_type_str's text.
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// AsyncEvent is an event the device reports outside the datapath. Exactly one
// of QP, CQ, SRQ or Port names what it is about (none for device events).
type AsyncEvent struct {
	Type    EventType
	QP      *QP
	CQ      *CQ
	SRQ     *SRQ
	Port    int
	Element uint64 // the raw element: a user handle, or the port number
}

// GetAsyncEvent waits for the next asynchronous event, on the runtime poller;
// cancelling ctx (or its deadline) ends the wait with ctx's error. It is
// safe for concurrent use: each event goes to one caller.
func (c *Context) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	c.mu.Lock()
	closed, fd := c.closed, c.asyncFD
	c.mu.Unlock()
	if closed || fd == nil {
		return AsyncEvent{}, opErr(c.dev.Name, "get async event", ErrClosed)
	}
	if ev, err, ok := c.fatalEvent(); ok {
		return ev, err
	}
	// Read into the struct itself: aligned for its fields (abi.As over a
	// byte array would not be), and per call. The device's removal ends
	// the wait (fatal.go).
	var desc abi.AsyncEventDesc
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.goneCtx(), cancel)
	defer stop()
	if _, err := fd.Read(rctx, abi.Bytes(&desc)); err != nil {
		if ctx.Err() == nil {
			if sys.ErrnoOf(err) == sys.EIO {
				// The kernel closed the queue of a disassociated context.
				c.fatal.Store(true)
			}
			if ev, err, ok := c.fatalEvent(); ok {
				return ev, err
			}
		}
		return AsyncEvent{}, opErr(c.dev.Name, "get async event", eventErr(err))
	}
	d := &desc
	ev := AsyncEvent{Type: EventType(d.EventType), Element: d.Element}
	if ev.Type == EventDeviceFatal {
		// From the kernel (a driver that disassociates): it answers EIO
		// from now on; fail early with the typed error instead.
		c.fatal.Store(true)
		c.fatalPending.Store(false)
		return ev, nil
	}
	c.mu.Lock()
	obj := c.lookup(d.Element)
	c.mu.Unlock()
	switch ev.Type {
	case EventCQErr:
		ev.CQ, _ = obj.(*CQ)
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained, EventPathMig,
		EventPathMigErr, EventQPLastWQEReached:
		ev.QP, _ = obj.(*QP)
	case EventSRQErr, EventSRQLimitReached:
		ev.SRQ, _ = obj.(*SRQ)
	case EventPortActive, EventPortErr, EventLIDChange, EventPkeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		ev.Port = int(d.Element)
	}
	return ev, nil
}

// fatalEvent is what GetAsyncEvent answers once the device is gone: its
// EventDeviceFatal once (to one caller), then ErrDeviceFatal. ok is false
// while the device is there.
func (c *Context) fatalEvent() (AsyncEvent, error, bool) {
	if !c.fatal.Load() {
		return AsyncEvent{}, nil, false
	}
	if c.fatalPending.CompareAndSwap(true, false) {
		return AsyncEvent{Type: EventDeviceFatal}, nil, true
	}
	return AsyncEvent{}, fatalErr(c.dev.Name, "get async event"), true
}
