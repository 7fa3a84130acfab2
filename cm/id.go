package cm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// ID is an rdma_cm identifier (struct rdma_cm_id): a socket-like endpoint
// that binds, resolves, listens, connects and accepts, and carries the QP
// created on it. Its events arrive on its own queue (GetEvent, WaitEvent).
//
// Concurrency: every method is safe for concurrent use; the kernel
// serialises commands per id. GetEvent/WaitEvent may be called from several
// goroutines, each event going to one of them. Close ends waiting calls with
// ErrClosed and may be called at any time, also with events unread.
type ID struct {
	ch      atomic.Pointer[Channel]
	handle  uint32
	uid     uint64
	ps      PortSpace
	qpType  uverbs.QPType
	ud      bool
	passive bool      // a listener's child
	req     ConnParam // the CONNECT_REQUEST's parameters (passive ids)

	mu      sync.Mutex
	queue   []*Event
	notify  chan struct{} // cap 1: the queue grew
	closeCh chan struct{}
	closed  bool
	failErr error
	// drop lists event types a cancelled wait abandoned: the next event of
	// one of them is the late answer to it and is discarded.
	drop []EventType
	// swallow is set when a connect failed in Go after CONNECT_RESPONSE:
	// the REJECTED/DISCONNECTED that follow are not reported (librdmacm
	// does the same).
	swallow bool

	// removed is set when a DEVICE_REMOVAL event arrived (DeviceRemoved)
	removed atomic.Bool

	dev   *devRef
	qp    *uverbs.QP
	ownCQ *uverbs.CQ
	ownCC *uverbs.CompChannel
	ownQP bool
}

// CreateID creates an id in port space ps (CREATE_ID). qpType matters only
// for PortSpaceIB (RC or UD); the IP port spaces imply it (TCP: RC, UDP and
// IPoIB: UD).
func (ch *Channel) CreateID(ps PortSpace, qpType uverbs.QPType) (*ID, error) {
	switch ps {
	case PortSpaceTCP:
		qpType = uverbs.QPTypeRC
	case PortSpaceUDP, PortSpaceIPoIB:
		qpType = uverbs.QPTypeUD
	case PortSpaceIB:
		if qpType != uverbs.QPTypeRC && qpType != uverbs.QPTypeUD {
			return nil, &Error{Op: "create id", Err: fmt.Errorf("port space IB takes an RC or UD QP type, not %v", qpType)}
		}
	default:
		return nil, &Error{Op: "create id", Err: fmt.Errorf("unknown port space %v", ps)}
	}
	if ch.closed.Load() {
		return nil, &Error{Op: "create id", Kind: ErrClosed}
	}
	id := &ID{uid: nextUID.Add(1), ps: ps, qpType: qpType, ud: qpType == uverbs.QPTypeUD,
		notify: make(chan struct{}, 1), closeCh: make(chan struct{})}
	out, err := ch.exec(abi.RDMA_USER_CM_CMD_CREATE_ID, abi.Size[abi.UcmCreateID](), abi.Size[abi.UcmCreateIDResp](), 0,
		func(in []byte, resp uint64, _ []byte) {
			c := abi.As[abi.UcmCreateID](in)
			c.UID, c.Response, c.PS, c.QPType = id.uid, resp, uint16(ps), uint8(qpType)
		})
	if err != nil {
		return nil, cmdErr("create id", err)
	}
	r, _ := abi.Read[abi.UcmCreateIDResp](out)
	id.handle = r.ID
	id.ch.Store(ch)
	ch.addID(id)
	registry.Store(id.uid, id)
	return id, nil
}

// Handle is the kernel's id number (0 is valid).
func (id *ID) Handle() uint32 { return id.handle }

// UID is the id's event key (never 0, never reused).
func (id *ID) UID() uint64 { return id.uid }

// PortSpace and QPType are what the id was created with.
func (id *ID) PortSpace() PortSpace  { return id.ps }
func (id *ID) QPType() uverbs.QPType { return id.qpType }
func (id *ID) Channel() *Channel     { return id.ch.Load() }
func (id *ID) String() string        { return fmt.Sprintf("cm id %d (%v)", id.handle, id.ps) }
func (id *ID) isClosed() bool        { id.mu.Lock(); defer id.mu.Unlock(); return id.closed }

// Request is the CONNECT_REQUEST's parameters of a listener's child id
// (zero for other ids): the peer's private data, QPN and its resources in
// the local view.
func (id *ID) Request() ConnParam { return id.req }

// exec runs a command on the id's current channel.
func (id *ID) exec(cmd uint32, inLen, outLen, scratchLen int, fill func(in []byte, resp uint64, scratch []byte)) ([]byte, error) {
	if id.isClosed() {
		return nil, sys.ErrFDClosed
	}
	return id.ch.Load().exec(cmd, inLen, outLen, scratchLen, fill)
}

// push queues an event (the channel's reader calls it).
func (id *ID) push(ev *Event) {
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		if ev.Child != nil {
			ev.Child.rejectAndClose()
		}
		return
	}
	id.queue = append(id.queue, ev)
	id.mu.Unlock()
	select {
	case id.notify <- struct{}{}:
	default:
	}
}

// unshift puts evs back at the head of the queue, in order (events a
// waiter took that were not its own).
func (id *ID) unshift(evs []*Event) {
	if len(evs) == 0 {
		return
	}
	id.mu.Lock()
	id.queue = append(append([]*Event(nil), evs...), id.queue...)
	id.mu.Unlock()
	select {
	case id.notify <- struct{}{}:
	default:
	}
}

func (id *ID) fail(err error) {
	id.mu.Lock()
	if id.failErr == nil {
		id.failErr = err
	}
	id.mu.Unlock()
	select {
	case id.notify <- struct{}{}:
	default:
	}
}

// next takes the next queued event, waiting under ctx. A ctx already done
// is an error even with events queued (as PollFD.Read and net.Conn do).
func (id *ID) next(ctx context.Context) (*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		id.mu.Lock()
		if id.closed {
			id.mu.Unlock()
			return nil, ErrClosed
		}
		for len(id.queue) > 0 {
			ev := id.queue[0]
			id.queue[0] = nil
			id.queue = id.queue[1:]
			if id.dropLocked(ev) {
				continue
			}
			more := len(id.queue) > 0
			id.mu.Unlock()
			if more { // pass the wake-up on to another waiter
				select {
				case id.notify <- struct{}{}:
				default:
				}
			}
			return ev, nil
		}
		if id.failErr != nil {
			err := id.failErr
			id.mu.Unlock()
			return nil, err
		}
		id.mu.Unlock()
		select {
		case <-id.notify:
		case <-id.closeCh:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (id *ID) dropLocked(ev *Event) bool {
	for i, t := range id.drop {
		if t == ev.Type || (t == EventAddrResolved && ev.Type == EventAddrError) ||
			(t == EventRouteResolved && ev.Type == EventRouteError) {
			id.drop = append(id.drop[:i], id.drop[i+1:]...)
			if ev.Child != nil {
				go ev.Child.rejectAndClose()
			}
			return true
		}
	}
	if id.swallow && (ev.Type == EventRejected || ev.Type == EventDisconnected) {
		return true
	}
	return false
}

// GetEvent returns the id's next event, waiting on the poller until one
// arrives, ctx ends (ctx.Err()) or the id is closed (ErrClosed). As
// librdmacm's rdma_get_cm_event does, it completes the connection of an id
// that has a QP: CONNECT_RESPONSE moves the QP to RTS and sends the RTU, and
// is reported as ESTABLISHED (or CONNECT_ERROR if that failed, with the QP
// in ERR); REJECTED moves the QP to ERR.
func (id *ID) GetEvent(ctx context.Context) (*Event, error) {
	ev, err := id.next(ctx)
	if err != nil {
		return nil, err
	}
	switch ev.Type {
	case EventConnectResponse:
		if qp := id.QP(); qp != nil {
			if err := id.establishQP(); err != nil {
				qp.ToErr()
				id.mu.Lock()
				id.swallow = true
				id.mu.Unlock()
				ev.Type, ev.Status = EventConnectError, -int32(sys.ErrnoOf(err))
				if ev.Status == 0 {
					ev.Status = -int32(sys.EIO)
				}
				return ev, nil
			}
			ev.Type = EventEstablished
		}
	case EventRejected, EventUnreachable:
		if qp := id.QP(); qp != nil {
			qp.ToErr()
		}
	}
	return ev, nil
}

// WaitEvent waits for the next event and wants it to be of type want: a
// failure event comes back as its typed error (Event.Err), another event as
// an error naming both. If ctx ends first, the late answer is dropped when
// it arrives, so the id can be used (or closed) again.
func (id *ID) WaitEvent(ctx context.Context, want EventType) (*Event, error) {
	ev, err := id.GetEvent(ctx)
	if err != nil {
		if ctx.Err() != nil {
			id.mu.Lock()
			id.drop = append(id.drop, want)
			id.mu.Unlock()
		}
		return nil, &Error{Op: "wait for " + want.String(), Err: err, Kind: kindOf(err)}
	}
	if ev.Type == want {
		return ev, nil
	}
	if e := eventErr("wait for "+want.String(), ev); e != nil {
		if ev.Child != nil {
			ev.Child.rejectAndClose()
		}
		return ev, e
	}
	if ev.Child != nil {
		ev.Child.rejectAndClose()
	}
	return ev, &Error{Op: "wait for " + want.String(), Event: ev.Type, Status: ev.Status, Err: fmt.Errorf("unexpected %s", ev.Type)}
}

func kindOf(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, ErrClosed), errors.Is(err, sys.ErrFDClosed):
		return ErrClosed
	}
	return nil
}

// Bind binds the id to a local address (BIND). Port 0 picks an ephemeral
// port; a specific IP also binds the id to that address's device.
func (id *ID) Bind(a Addr) error {
	var perr error
	_, err := id.exec(abi.RDMA_USER_CM_CMD_BIND, abi.Size[abi.UcmBind](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmBind](in)
		c.ID = id.handle
		n, err := putSockaddr(c.Addr[:], a)
		perr = err
		c.AddrSize = uint16(n)
	})
	if perr != nil {
		return &Error{Op: "bind " + a.String(), Err: perr}
	}
	return cmdErr("bind "+a.String(), err)
}

// DefaultResolveTimeout is the address and route resolution timeout when the
// context has no deadline (rping and perftest use 2000 ms).
const DefaultResolveTimeout = 2000 * time.Millisecond

// ResolveAddr starts resolving dst (and binds to src, if given, else to the
// source the route picks) (RESOLVE_ADDR). The answer is an ADDR_RESOLVED or
// ADDR_ERROR event. timeout 0 means DefaultResolveTimeout. Routing failures
// come back at once as ErrUnreachable.
func (id *ID) ResolveAddr(src, dst Addr, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultResolveTimeout
	}
	op := "resolve address " + dst.String()
	var perr error
	_, err := id.exec(abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, abi.Size[abi.UcmResolveAddr](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmResolveAddr](in)
		c.ID, c.TimeoutMs = id.handle, uint32(max(timeout.Milliseconds(), 1))
		n, err := putSockaddr(c.SrcAddr[:], src)
		c.SrcSize = uint16(n)
		m, err2 := putSockaddr(c.DstAddr[:], dst)
		c.DstSize = uint16(m)
		perr = errors.Join(err, err2)
	})
	if perr != nil {
		return &Error{Op: op, Err: perr}
	}
	if err != nil {
		e := cmdErr(op, err).(*Error)
		if sys.ErrnoOf(err) == sys.ENODEV {
			e.Kind = ErrUnreachable
		}
		return e
	}
	return nil
}

// ResolveRoute starts route resolution (RESOLVE_ROUTE); the answer is a
// ROUTE_RESOLVED or ROUTE_ERROR event. On RoCE the route is local and the
// event is queued at once.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultResolveTimeout
	}
	_, err := id.exec(abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, abi.Size[abi.UcmResolveRoute](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmResolveRoute](in)
		c.ID, c.TimeoutMs = id.handle, uint32(max(timeout.Milliseconds(), 1))
	})
	if err != nil {
		e := cmdErr("resolve route", err).(*Error)
		if sys.ErrnoOf(err) == sys.ENODEV {
			e.Kind = ErrRouteFailed
		}
		return e
	}
	return nil
}

// timeoutOf is what is left of ctx's deadline (DefaultResolveTimeout without one).
func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return DefaultResolveTimeout
}

// Resolve resolves dst's address and then its route, waiting for both
// events; ctx's deadline is the kernel's timeout for each step and its
// cancellation ends the wait. src may be the zero Addr.
func (id *ID) Resolve(ctx context.Context, src, dst Addr) error {
	if err := id.ResolveAddr(src, dst, timeoutOf(ctx)); err != nil {
		return err
	}
	if _, err := id.WaitEvent(ctx, EventAddrResolved); err != nil {
		return relabel(err, "resolve address "+dst.String())
	}
	if err := id.ResolveRoute(timeoutOf(ctx)); err != nil {
		return err
	}
	if _, err := id.WaitEvent(ctx, EventRouteResolved); err != nil {
		return relabel(err, "resolve route to "+dst.String())
	}
	return nil
}

func relabel(err error, op string) error {
	var e *Error
	if errors.As(err, &e) {
		e.Op = op
	}
	return err
}

// Listen makes the id a listener (LISTEN); backlog ≤0 means the kernel's
// maximum (net.rdma_ucm.max_backlog, 1024). Connection requests arrive as
// CONNECT_REQUEST events whose Child is the new id. An unbound id is bound
// to 0.0.0.0 and an ephemeral port first (LocalAddr tells which).
func (id *ID) Listen(backlog int) error {
	if backlog < 0 {
		backlog = 0
	}
	_, err := id.exec(abi.RDMA_USER_CM_CMD_LISTEN, abi.Size[abi.UcmListen](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmListen](in)
		c.ID, c.Backlog = id.handle, uint32(backlog)
	})
	return cmdErr("listen", err)
}

// Connect sends the connection request (CONNECT): a CM REQ on RC ids, a SIDR
// REQ on UD ids. p nil uses librdmacm's defaults (responder resources and
// initiator depth at the device maxima, retry 7, RNR retry 7). The QPN is
// the id's QP's when it has one. An RC id with a QP is answered by
// ESTABLISHED (GetEvent completes the handshake), else by CONNECT_RESPONSE
// (then call Establish), or by REJECTED/UNREACHABLE.
func (id *ID) Connect(p *ConnParam) error {
	var cp ConnParam
	if p != nil {
		cp = *p
	} else {
		cp = ConnParam{RetryCount: 7, RNRRetryCount: 7}
		if d, err := id.device(); err == nil {
			cp.ResponderResources = uint8(min(d.attr.MaxQPRdAtom, 255))
			cp.InitiatorDepth = uint8(min(d.attr.MaxQPInitRdAtom, 255))
		}
	}
	qpn := cp.QPN
	if qp := id.QP(); qp != nil {
		qpn = qp.QPN()
		cp.SRQ = cp.SRQ || qp.SRQ() != nil // librdmacm: conn_param.srq from id->srq
	}
	var perr error
	_, err := id.exec(abi.RDMA_USER_CM_CMD_CONNECT, abi.Size[abi.UcmConnect](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmConnect](in)
		perr = putConnParam(&c.ConnParam, &cp, qpn)
		c.ID = id.handle
	})
	if perr != nil {
		return &Error{Op: "connect", Err: perr}
	}
	return cmdErr("connect", err)
}

// Accept accepts the connection request of a listener's child id (ACCEPT).
// With a QP on the id it first moves the QP through INIT, RTR and RTS from
// INIT_QP_ATTR (the kernel never touches a user QP; the peer may send as soon
// as the REP arrives), with responder resources and initiator depth clamped
// to the device maxima, as librdmacm's rdma_accept does. p nil takes the
// request's values. RC ids then get ESTABLISHED when the RTU arrives; UD ids
// (SIDR) get no further event.
func (id *ID) Accept(p *ConnParam) error {
	var cp ConnParam
	if p != nil {
		cp = *p
	} else {
		cp = ConnParam{ResponderResources: id.req.ResponderResources, InitiatorDepth: id.req.InitiatorDepth,
			RetryCount: 7, RNRRetryCount: 7}
	}
	qp := id.QP()
	if d, err := id.device(); err == nil && !id.ud {
		cp.ResponderResources = uint8(min(uint32(cp.ResponderResources), d.attr.MaxQPRdAtom))
		cp.InitiatorDepth = uint8(min(uint32(cp.InitiatorDepth), d.attr.MaxQPInitRdAtom))
	}
	qpn := cp.QPN
	if qp != nil {
		qpn = qp.QPN()
		cp.SRQ = cp.SRQ || qp.SRQ() != nil
		if !id.ud {
			if err := id.qpToRTS(cp.ResponderResources, cp.InitiatorDepth, true); err != nil {
				qp.ToErr()
				return &Error{Op: "accept: bring the QP up", Err: err}
			}
		}
	}
	var perr error
	_, err := id.exec(abi.RDMA_USER_CM_CMD_ACCEPT, abi.Size[abi.UcmAccept](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmAccept](in)
		perr = putConnParam(&c.ConnParam, &cp, qpn)
		c.UID, c.ID = id.uid, id.handle
	})
	if perr != nil {
		return &Error{Op: "accept", Err: perr}
	}
	if err != nil && qp != nil {
		qp.ToErr()
	}
	return cmdErr("accept", err)
}

// Establish completes an active RC connection after CONNECT_RESPONSE when
// the application manages the QP itself (rdma_establish): ACCEPT with
// valid=0 sends the RTU. Bring the QP to RTS first.
func (id *ID) Establish() error {
	_, err := id.exec(abi.RDMA_USER_CM_CMD_ACCEPT, abi.Size[abi.UcmAccept](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmAccept](in)
		c.UID, c.ID = id.uid, id.handle
	})
	return cmdErr("establish", err)
}

// Reject refuses a connection request (REJECT) with reason 28 (consumer
// defined; 0 means 28 too) or 35, and up to 148 bytes of private data on RC
// (136 on UD, sent as a SIDR REP with status 2).
func (id *ID) Reject(privateData []byte, reason RejectReason) error {
	if reason == 0 {
		reason = RejectConsumerDefined
	}
	return cmdErr("reject", id.ch.Load().reject(id.handle, privateData, reason))
}

// Disconnect moves the id's QP to ERR (flushing its work requests) and
// sends a DREQ (or the DREP to a received DREQ) (DISCONNECT). Both sides
// then get DISCONNECTED.
func (id *ID) Disconnect() error {
	if qp := id.QP(); qp != nil {
		qp.ToErr()
	}
	_, err := id.exec(abi.RDMA_USER_CM_CMD_DISCONNECT, abi.Size[abi.UcmDisconnect](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		abi.As[abi.UcmDisconnect](in).ID = id.handle
	})
	return cmdErr("disconnect", err)
}

// Notify tells the CM about a QP event: NotifyCommEstablished (4) forces
// ESTABLISHED on a passive id whose first packet came before the RTU;
// NotifyPathMigrated (6).
func (id *ID) Notify(event uint32) error {
	_, err := id.exec(abi.RDMA_USER_CM_CMD_NOTIFY, abi.Size[abi.UcmNotify](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmNotify](in)
		c.ID, c.Event = id.handle, event
	})
	return cmdErr("notify", err)
}

const (
	NotifyCommEstablished = abi.IB_CM_EVENT_COMM_EST
	NotifyPathMigrated    = abi.IB_CM_EVENT_PATH_MIG
)

// setOption is SET_OPTION with optval bytes.
func (id *ID) setOption(level, name uint32, val []byte) error {
	_, err := id.exec(abi.RDMA_USER_CM_CMD_SET_OPTION, abi.Size[abi.UcmSetOption](), 0, len(val), func(in []byte, _ uint64, scratch []byte) {
		copy(scratch, val)
		c := abi.As[abi.UcmSetOption](in)
		c.OptVal, c.ID, c.Level, c.OptName, c.OptLen = sys.Addr(scratch), id.handle, level, name, uint32(len(val))
	})
	return err
}

// SetTOS sets the type of service (traffic class and SL of the path); set it
// before ResolveRoute.
func (id *ID) SetTOS(tos uint8) error {
	return cmdErr("set option TOS", id.setOption(abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_TOS, []byte{tos}))
}

// SetReuseAddr lets the id bind a port other ids with the option also bind
// (enable in any state but LISTEN; disable only before binding).
func (id *ID) SetReuseAddr(on bool) error {
	return cmdErr("set option REUSEADDR", id.setOption(abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_REUSEADDR, u32opt(on)))
}

// SetAFOnly makes an AF_INET6 id accept only IPv6 (before binding).
func (id *ID) SetAFOnly(on bool) error {
	return cmdErr("set option AFONLY", id.setOption(abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_AFONLY, u32opt(on)))
}

// SetAckTimeout overrides the QP's RTS ACK timeout (4.096 µs × 2^t); RC ids
// only. Set before ResolveRoute it also shortens the CM's packet lifetime.
func (id *ID) SetAckTimeout(t uint8) error {
	return cmdErr("set option ACK_TIMEOUT", id.setOption(abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_ACK_TIMEOUT, []byte{t}))
}

func u32opt(on bool) []byte {
	b := make([]byte, 4)
	if on {
		le.PutUint32(b, 1)
	}
	return b
}

// Migrate moves the id, and its events not yet read, to channel to
// (MIGRATE_ID, written to the destination file). The id's Go queue moves
// with it, so no event is lost.
func (id *ID) Migrate(to *Channel) error {
	from := id.ch.Load()
	if from == to {
		return nil
	}
	if id.isClosed() {
		return &Error{Op: "migrate", Kind: ErrClosed}
	}
	_, err := to.exec(abi.RDMA_USER_CM_CMD_MIGRATE_ID, abi.Size[abi.UcmMigrateID](), abi.Size[abi.UcmMigrateResp](), 0,
		func(in []byte, resp uint64, _ []byte) {
			c := abi.As[abi.UcmMigrateID](in)
			c.Response, c.ID, c.FD = resp, id.handle, uint32(from.FD())
		})
	if err != nil {
		return cmdErr("migrate", err)
	}
	id.ch.Store(to)
	from.removeID(id)
	to.addID(id)
	to.wake() // the moved events raise no readability edge on to's file
	return nil
}

// Close destroys the id (DESTROY_ID): its QP and CQ if it created them,
// then the kernel id, with the wire effect of its state (REJ to a pending
// request, DREQ when connected). Events not yet read are discarded; a
// listener's unread connection requests are rejected. It is idempotent.
func (id *ID) Close() error {
	if id == nil {
		return nil
	}
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return nil
	}
	id.closed = true
	queue := id.queue
	id.queue = nil
	close(id.closeCh)
	qp, cq, cc, own, dev := id.qp, id.ownCQ, id.ownCC, id.ownQP, id.dev
	id.qp, id.ownCQ, id.ownCC, id.dev = nil, nil, nil, nil
	id.mu.Unlock()

	var errs []error
	if err := closeQP(qp, own, cq, cc); err != nil {
		errs = append(errs, err)
	}
	ch := id.ch.Load()
	if _, err := ch.destroy(abi.RDMA_USER_CM_CMD_DESTROY_ID, id.handle); err != nil && !errors.Is(err, sys.ErrFDClosed) {
		errs = append(errs, cmdErr("destroy id", err))
	}
	registry.Delete(id.uid)
	ch.removeID(id)
	for _, ev := range queue {
		if ev.Child != nil {
			ev.Child.rejectAndClose()
		}
	}
	if dev != nil {
		dev.release()
	}
	return errors.Join(errs...)
}

// rejectAndClose answers a connection request nobody will accept.
func (id *ID) rejectAndClose() {
	if !id.isClosed() {
		id.ch.Load().reject(id.handle, nil, RejectConsumerDefined)
	}
	id.Close()
}

// removals counts the DEVICE_REMOVAL events every channel's reader saw.
var removals atomic.Uint64

// DeviceRemovals is the number of DEVICE_REMOVAL events received so far
// on any id of the process. A user holding ids on devices that may go
// compares it with the value it last saw (one atomic load, cheap enough
// for a polling loop) and asks its ids DeviceRemoved only when it moved.
// Safe for concurrent use.
func DeviceRemovals() uint64 { return removals.Load() }

// DeviceRemoved reports whether a DEVICE_REMOVAL event arrived on id: its
// RDMA device is being removed (rdma link delete, a driver unbound, a
// hot-unplug). The kernel has already destroyed the id's kernel side
// (ucma does on that event); what is left can only be closed. The device
// goes only once every id, QP, CQ, MR and PD on it is closed: a provider
// that cannot revoke its user contexts (soft-RoCE) makes the removal wait
// for that. Safe for concurrent use, whether or not the event was read
// with GetEvent.
func (id *ID) DeviceRemoved() bool { return id.removed.Load() }
