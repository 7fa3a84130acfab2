package cm

import (
	"context"
	"errors"
	"sync"

	"github.com/ibgo/ibgo/uverbs"
)

// DefaultCap is the QP size Dial and Listen use when none is given.
var DefaultCap = uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}

// Conn is a connected QP and the rdma_cm id (on its own event channel) that
// connected it: what Dial and Listener.Accept return.
//
// Concurrency: every method is safe for concurrent use; the QP's own
// concurrency rules apply to posting and polling (see uverbs.QP, uverbs.CQ).
// Close disconnects and releases everything, also while another goroutine
// waits in WaitDisconnect (which then returns ErrClosed).
type Conn struct {
	id     *ID
	ch     *Channel
	remote ConnParam // the peer's parameters: CONNECT_REQUEST's (server) or the REP's (client)
	ud     UDParam   // UD: the peer's QPN, Q_Key and address (client side)

	mu           sync.Mutex
	disconnected bool
	closed       bool
}

// ID is the connection's rdma_cm id (for programs that need its events).
func (c *Conn) ID() *ID { return c.id }

// QP is the connected QP (RTS), owned by the Conn.
func (c *Conn) QP() *uverbs.QP { return c.id.QP() }

// PD is the protection domain the QP is on: the Dialer's or ListenConfig's,
// or the device's shared one (register buffers with it).
func (c *Conn) PD() *uverbs.PD { return c.id.QP().PD() }

// CompChannel is the completion channel of the Conn's own CQ (nil when the
// Dialer or ListenConfig gave CQs).
func (c *Conn) CompChannel() *uverbs.CompChannel { return c.id.CompChannel() }

// SendCQ and RecvCQ are the QP's completion queues.
func (c *Conn) SendCQ() *uverbs.CQ { return c.id.QP().SendCQ() }
func (c *Conn) RecvCQ() *uverbs.CQ { return c.id.QP().RecvCQ() }

// Remote is the peer's connection parameters: its private data (CONNECT
// data on the server, ACCEPT data on the client; kernel-padded to the
// message maximum), QPN and resources in our view.
func (c *Conn) Remote() ConnParam { return c.remote }

// RemoteUD is the peer's UD address (UDP port space, client side).
func (c *Conn) RemoteUD() UDParam { return c.ud }

// LocalAddr and RemoteAddr are the connection's addresses (QUERY ADDR).
func (c *Conn) LocalAddr() Addr {
	a, _ := c.id.Query()
	return a.Src
}
func (c *Conn) RemoteAddr() Addr {
	a, _ := c.id.Query()
	return a.Dst
}

// WaitDisconnect waits until the peer disconnects (a DISCONNECTED event;
// the QP is then in ERR and its work requests flushed) and answers it with
// DISCONNECT (the DREP). Other events are skipped. It returns ctx's error
// if ctx ends first, ErrClosed if the Conn is closed.
func (c *Conn) WaitDisconnect(ctx context.Context) error {
	for {
		ev, err := c.id.GetEvent(ctx)
		if err != nil {
			return &Error{Op: "wait for disconnect", Kind: kindOf(err), Err: err}
		}
		if ev.Type == EventDisconnected || ev.Type == EventDeviceRemoval {
			c.mu.Lock()
			already := c.disconnected
			c.disconnected = true
			c.mu.Unlock()
			if !already {
				c.id.Disconnect()
			}
			return nil
		}
	}
}

// Disconnect disconnects (QP to ERR, DREQ) without releasing anything.
func (c *Conn) Disconnect() error {
	c.mu.Lock()
	already := c.disconnected
	c.disconnected = true
	c.mu.Unlock()
	if already {
		return nil
	}
	return c.id.Disconnect()
}

// Close disconnects if still connected, then destroys the QP, its CQ, the id
// and its channel. It is idempotent.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	disc := !c.disconnected
	c.disconnected = true
	c.mu.Unlock()
	if disc {
		c.id.Disconnect()
	}
	return errors.Join(c.id.Close(), c.ch.Close())
}

// Dialer connects to an rdma_cm listener. The zero Dialer is ready: an RC
// connection in the TCP port space with DefaultCap and librdmacm's default
// parameters.
//
// Concurrency: a Dialer is read-only during Dial, which may run from
// several goroutines at once.
type Dialer struct {
	Source     Addr      // local address (zero: the route's)
	PortSpace  PortSpace // 0: PortSpaceTCP
	PD         *uverbs.PD
	SendCQ     *uverbs.CQ // nil (with RecvCQ): a CQ owned by the Conn
	RecvCQ     *uverbs.CQ
	SRQ        *uverbs.SRQ
	Cap        uverbs.QPCap // zero: DefaultCap
	Param      *ConnParam   // nil: librdmacm's defaults (device maxima, retry 7, RNR 7)
	TOS        *uint8       // set before route resolution
	AckTimeout uint8        // 0: the kernel's
	// Timestamps asks for completion timestamps on the Conn's own CQ
	// where the device has a completion clock (QPInitAttr.Timestamps).
	Timestamps bool
	// BeforeConnect runs once the QP exists (INIT) and before the request
	// leaves: post receives here, so the peer's first message finds one.
	BeforeConnect func(c *Conn) error
}

// Dial connects to addr (an IP and port) with the zero Dialer.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	var d Dialer
	return d.Dial(ctx, a)
}

// Dial resolves dst, creates the QP and connects, returning when the
// connection is established (the QP in RTS, the RTU sent). ctx bounds the
// whole exchange (address and route resolution use its deadline as their
// kernel timeout). Failures are *Error values of kind ErrUnreachable,
// ErrRouteFailed, ErrRefused (with the REJ reason and the peer's data),
// ErrTimeout or ErrClosed; nothing is left open.
func (d *Dialer) Dial(ctx context.Context, dst Addr) (*Conn, error) { return d.dial(ctx, dst) }

func (d *Dialer) dial(ctx context.Context, dst Addr) (_ *Conn, err error) {
	ps := d.PortSpace
	if ps == 0 {
		ps = PortSpaceTCP
	}
	ch, err := NewChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(ps, uverbs.QPTypeRC)
	if err != nil {
		ch.Close()
		return nil, err
	}
	c := &Conn{id: id, ch: ch}
	defer func() {
		if err != nil {
			c.mu.Lock()
			c.disconnected = true
			c.mu.Unlock()
			c.Close()
		}
	}()
	op := "dial " + dst.String()
	if d.TOS != nil {
		if err := id.SetTOS(*d.TOS); err != nil {
			return nil, err
		}
	}
	if d.AckTimeout != 0 {
		if err := id.SetAckTimeout(d.AckTimeout); err != nil {
			return nil, err
		}
	}
	if err := id.Resolve(ctx, d.Source, dst); err != nil {
		return nil, err
	}
	cp := d.Cap
	if cp == (uverbs.QPCap{}) {
		cp = DefaultCap
	}
	if _, err := id.CreateQP(d.PD, QPInitAttr{SendCQ: d.SendCQ, RecvCQ: d.RecvCQ, SRQ: d.SRQ, Cap: cp, Timestamps: d.Timestamps}); err != nil {
		return nil, relabel(err, op+": create qp")
	}
	if d.BeforeConnect != nil {
		if err := d.BeforeConnect(c); err != nil {
			return nil, &Error{Op: op + ": before connect", Err: err}
		}
	}
	if err := id.Connect(d.Param); err != nil {
		return nil, relabel(err, op)
	}
	ev, err := id.WaitEvent(ctx, EventEstablished)
	if err != nil {
		return nil, relabel(err, op)
	}
	if ev.UD {
		c.ud = ev.UDP
	} else {
		c.remote = ev.Conn
	}
	return c, nil
}

// ListenConfig configures a Listener. The zero value listens in the TCP port
// space with the kernel's maximum backlog and DefaultCap QPs.
//
// Concurrency: read-only once Listen has been called.
type ListenConfig struct {
	PortSpace PortSpace
	Backlog   int // ≤0: the kernel's maximum (1024)
	ReuseAddr bool
	PD        *uverbs.PD
	Cap       uverbs.QPCap
	SRQ       *uverbs.SRQ
	// Timestamps asks for completion timestamps on each accepted Conn's
	// own CQ where the device has a completion clock
	// (QPInitAttr.Timestamps).
	Timestamps bool
	// Param are the accept parameters; nil takes the request's responder
	// resources and initiator depth (clamped to the device), retry 7, RNR 7.
	Param *ConnParam
	// BeforeAccept runs once the new connection's QP exists and before the
	// REP leaves: post receives here, or return an error to reject the
	// request (a *RejectError's private data and reason are sent).
	BeforeAccept func(c *Conn) error
}

// RejectError is what BeforeAccept returns to refuse a connection with
// private data.
type RejectError struct {
	PrivateData []byte
	Reason      RejectReason // 0: consumer defined (28)
}

func (e *RejectError) Error() string { return "connection rejected by the application" }

// Listener accepts rdma_cm connections.
//
// Concurrency: Accept may be called from several goroutines (each request
// goes to one); Close ends them with ErrClosed and rejects requests not yet
// accepted.
type Listener struct {
	cfg ListenConfig
	ch  *Channel
	id  *ID
}

// Listen listens on addr ("10.0.0.1:7174", ":7174" or "[::]:7174") with the
// zero ListenConfig.
func Listen(addr string) (*Listener, error) {
	var lc ListenConfig
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	return lc.Listen(a)
}

// Listen binds a and listens. A port another listener holds is an *Error
// of kind ErrPortInUse.
func (lc *ListenConfig) Listen(a Addr) (*Listener, error) {
	ps := lc.PortSpace
	if ps == 0 {
		ps = PortSpaceTCP
	}
	ch, err := NewChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(ps, uverbs.QPTypeRC)
	if err == nil && lc.ReuseAddr {
		err = id.SetReuseAddr(true)
	}
	if err == nil {
		err = id.Bind(a)
	}
	if err == nil {
		err = id.Listen(lc.Backlog)
	}
	if err != nil {
		ch.Close()
		return nil, relabel(err, "listen on "+a.String())
	}
	return &Listener{cfg: *lc, ch: ch, id: id}, nil
}

// ID is the listening id.
func (l *Listener) ID() *ID { return l.id }

// Addr is the bound address (with the kernel's port if 0 was asked).
func (l *Listener) Addr() Addr {
	a, _ := l.id.Query()
	return a.Src
}

// Accept waits for a connection request and accepts it: the new id moves
// to its own channel (MIGRATE_ID, as librdmacm's synchronous mode does),
// gets a QP brought to RTS from INIT_QP_ATTR, BeforeAccept runs, the REP
// leaves, and Accept returns once the RTU arrives (ESTABLISHED); UD (SIDR)
// connections return after the REP. A request that fails on the way is
// rejected and Accept waits for the next one only if ctx allows; the
// failure is returned.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	ev, err := l.id.WaitEvent(ctx, EventConnectRequest)
	if err != nil {
		return nil, relabel(err, "accept")
	}
	child := ev.Child
	ch, err := NewChannel()
	if err != nil {
		child.rejectAndClose()
		return nil, err
	}
	c := &Conn{id: child, ch: ch, remote: ev.Conn}
	if ev.UD {
		c.ud = ev.UDP
	}
	fail := func(err error) (*Conn, error) {
		var rj *RejectError
		if errors.As(err, &rj) {
			child.Reject(rj.PrivateData, rj.Reason)
		} else {
			child.Reject(nil, RejectConsumerDefined)
		}
		c.mu.Lock()
		c.disconnected = true
		c.mu.Unlock()
		c.Close()
		return nil, err
	}
	if err := child.Migrate(ch); err != nil {
		return fail(err)
	}
	cp := l.cfg.Cap
	if cp == (uverbs.QPCap{}) {
		cp = DefaultCap
	}
	if _, err := child.CreateQP(l.cfg.PD, QPInitAttr{SRQ: l.cfg.SRQ, Cap: cp, Timestamps: l.cfg.Timestamps}); err != nil {
		return fail(relabel(err, "accept: create qp"))
	}
	if l.cfg.BeforeAccept != nil {
		if err := l.cfg.BeforeAccept(c); err != nil {
			return fail(err)
		}
	}
	if err := child.Accept(l.cfg.Param); err != nil {
		return fail(err)
	}
	if child.ud {
		return c, nil
	}
	if _, err := child.WaitEvent(ctx, EventEstablished); err != nil {
		return fail(relabel(err, "accept: wait for the RTU"))
	}
	return c, nil
}

// Close stops listening: the id is destroyed (requests not yet accepted are
// rejected) and the channel closed. Accepted connections live on.
func (l *Listener) Close() error {
	return errors.Join(l.id.Close(), l.ch.Close())
}
