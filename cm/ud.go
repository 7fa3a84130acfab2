package cm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// UDPQKey is the Q_Key of every UDP-port-space id (the kernel's
// RDMA_UDP_QKEY): the INIT Q_Key of a QP created on such an id, the Q_Key a
// SIDR REP carries and a multicast group's. Send to rdma_cm UD peers with
// it; a QP with another Q_Key silently drops their datagrams.
const UDPQKey = abi.RDMA_UDP_QKEY

// MulticastQPN is the remote QPN of every multicast send (0xFFFFFF).
const MulticastQPN = 0xFFFFFF

// SIDR REP statuses (enum ib_cm_sidr_status) as UNREACHABLE events of UD
// ids report them in Event.Status and Error.Status.
const (
	SIDRUnsupported        = 1 // nobody listens on that service id (port) in the UDP port space
	SIDRReject             = 2 // the server rejected the request (Error.PrivateData has its data)
	SIDRNoQP               = 3
	SIDRRedirect           = 4
	SIDRUnsupportedVersion = 5
)

// UDPeer is where UD datagrams for a remote QP go: its QPN and Q_Key and an
// address handle on the caller's PD, as SIDR (the ESTABLISHED of a UD
// connect) or a multicast join (MULTICAST_JOIN) report them.
//
// Concurrency: the fields are read-only after creation and Dest may be
// called from several goroutines; Close is idempotent and must not race
// with sends that use the AH.
type UDPeer struct {
	QPN    uint32
	QKey   uint32
	AHAttr uverbs.AHAttr
	AH     *uverbs.AH
	// PrivateData is the server's SIDR REP data, 136 bytes (the kernel pads
	// whatever was sent); nil for multicast.
	PrivateData []byte
}

// NewUDPeer creates the address handle for p (CREATE_AH on pd from the
// event's ah_attr, as udaddy's and mckey's ibv_create_ah does).
func NewUDPeer(pd *uverbs.PD, p UDParam) (*UDPeer, error) {
	if pd == nil {
		return nil, &Error{Op: "address handle", Err: errors.New("no PD")}
	}
	ah, err := pd.CreateAH(p.AH)
	if err != nil {
		return nil, &Error{Op: fmt.Sprintf("address handle for QPN %#x at %s", p.QPN, p.AH.GRH.DGID), Err: err}
	}
	return &UDPeer{QPN: p.QPN, QKey: p.QKey, AHAttr: p.AH, AH: ah, PrivateData: p.PrivateData}, nil
}

// Dest addresses wr to the peer (its AH, RemoteQPN and RemoteQKey).
func (p *UDPeer) Dest(wr *uverbs.SendWR) {
	wr.AH, wr.RemoteQPN, wr.RemoteQKey = p.AH, p.QPN, p.QKey
}

// Close destroys the address handle.
func (p *UDPeer) Close() error {
	if p == nil {
		return nil
	}
	return p.AH.Close()
}

// UDOptions configure a UD endpoint (OpenUD, DialUD, ListenUD). The zero
// value (or nil) is ready: the device's shared PD, one CQ for both queues,
// DefaultCap.
type UDOptions struct {
	// PD is where the QP (and the peers' AHs) are created; nil: the shared
	// PD of the id's device (ID.Verbs). It must be on the device the address
	// resolves to.
	PD *uverbs.PD
	// SendCQ and RecvCQ; nil (either): one CQ for both queues, owned by
	// the endpoint.
	SendCQ, RecvCQ *uverbs.CQ
	Cap            uverbs.QPCap // zero: DefaultCap
	SigAll         bool
	// Timestamps asks for completion timestamps on the endpoint's own CQ
	// where the device has a completion clock (QPInitAttr.Timestamps).
	Timestamps bool
	// Source is the local address DialUD resolves from (zero: the route's).
	Source Addr
	// PrivateData goes with DialUD's SIDR request (≤180 bytes; the server
	// sees it padded to 180).
	PrivateData []byte
	// TOS, if set, is the type of service of DialUD's path (the AH's traffic
	// class).
	TOS *uint8
	// Backlog of ListenUD (≤0: the kernel's maximum).
	Backlog int
}

// UDEndpoint is a UD QP on an rdma_cm id of the UDP port space, on its own
// event channel: the QP is in RTS with the Q_Key the CM gives (UDPQKey), so
// it can receive at once, send to any UDPeer, answer SIDR (ListenUD) and
// join multicast groups. OpenUD binds one to a local address; DialUD also
// resolves a server.
//
// Concurrency: every method is safe for concurrent use; the QP's and CQs'
// own rules apply to posting and polling. Close leaves the endpoint's
// groups, then destroys the QP, its CQ, the id and the channel.
type UDEndpoint struct {
	ch *Channel
	id *ID

	joinMu sync.Mutex // one JOIN_MCAST waits for its event at a time

	mu     sync.Mutex
	groups map[*Multicast]struct{}
	closed bool
}

func (o *UDOptions) cap() uverbs.QPCap {
	if o.Cap == (uverbs.QPCap{}) {
		return DefaultCap
	}
	return o.Cap
}

// newUDEndpoint creates the channel and a UDP-port-space id.
func newUDEndpoint() (*UDEndpoint, error) {
	ch, err := NewChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(PortSpaceUDP, uverbs.QPTypeUD)
	if err != nil {
		ch.Close()
		return nil, err
	}
	return &UDEndpoint{ch: ch, id: id, groups: map[*Multicast]struct{}{}}, nil
}

// createQP creates the endpoint's QP (INIT with the CM's Q_Key, RTR, RTS).
func (e *UDEndpoint) createQP(o *UDOptions) error {
	_, err := e.id.CreateQP(o.PD, QPInitAttr{SendCQ: o.SendCQ, RecvCQ: o.RecvCQ, Cap: o.cap(), SigAll: o.SigAll, Timestamps: o.Timestamps})
	return err
}

// OpenUD binds a UD endpoint to local ("10.0.0.1", "10.0.0.1:7000", or
// "[fe80::1%eth0]:0"; a specific IP, which chooses the device) and creates
// its QP. Use it to join multicast groups or to send to peers learnt
// otherwise; ctx is accepted for symmetry and checked once.
func OpenUD(ctx context.Context, local string, opts *UDOptions) (*UDEndpoint, error) {
	a, err := ParseAddr(local)
	if err != nil {
		return nil, err
	}
	return OpenUDAddr(ctx, a, opts)
}

// OpenUDAddr is OpenUD with a parsed address.
func OpenUDAddr(ctx context.Context, local Addr, opts *UDOptions) (*UDEndpoint, error) {
	if opts == nil {
		opts = &UDOptions{}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "open UD endpoint " + local.String(), Kind: kindOf(err), Err: err}
	}
	if local.IP.IsValid() && local.IP.Addr().IsUnspecified() {
		return nil, &Error{Op: "open UD endpoint " + local.String(),
			Err: errors.New("a UD endpoint needs a specific local IP: it chooses the device its QP lives on")}
	}
	e, err := newUDEndpoint()
	if err != nil {
		return nil, err
	}
	if err := e.id.Bind(local); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.createQP(opts); err != nil {
		e.Close()
		return nil, relabel(err, "open UD endpoint "+local.String()+": create qp")
	}
	return e, nil
}

// DialUD resolves addr ("10.0.0.1:7174") in the UDP port space, creates
// the endpoint's QP on the device the route leads to, and asks the server
// for its QP by service id resolution (SIDR: a UD CONNECT, answered by
// ESTABLISHED). It returns the endpoint and the server's UDPeer (AH on the
// endpoint's PD). ctx bounds the whole exchange. Failures are *Error
// values: ErrUnreachable (no route; Status SIDRUnsupported when nobody
// listens on the port; ErrTimeout too when the server never answered),
// ErrRefused (the server rejected it: Status SIDRReject, PrivateData its
// 136 bytes), ErrTimeout (ctx's deadline).
func DialUD(ctx context.Context, addr string, opts *UDOptions) (*UDEndpoint, *UDPeer, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, nil, err
	}
	return DialUDAddr(ctx, a, opts)
}

// DialUDAddr is DialUD with a parsed address.
func DialUDAddr(ctx context.Context, dst Addr, opts *UDOptions) (*UDEndpoint, *UDPeer, error) {
	if opts == nil {
		opts = &UDOptions{}
	}
	e, err := newUDEndpoint()
	if err != nil {
		return nil, nil, err
	}
	p, err := e.dial(ctx, dst, opts)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return e, p, nil
}

func (e *UDEndpoint) dial(ctx context.Context, dst Addr, opts *UDOptions) (*UDPeer, error) {
	op := "dial UD " + dst.String()
	if opts.TOS != nil {
		if err := e.id.SetTOS(*opts.TOS); err != nil {
			return nil, err
		}
	}
	if err := e.id.Resolve(ctx, opts.Source, dst); err != nil {
		return nil, err
	}
	if err := e.createQP(opts); err != nil {
		return nil, relabel(err, op+": create qp")
	}
	p, err := e.Resolve(ctx, opts.PrivateData)
	if err != nil {
		return nil, relabel(err, op)
	}
	return p, nil
}

// Resolve sends a SIDR request from the endpoint's route-resolved id with
// privateData (≤180 bytes) and waits for the server's answer: the server's
// UDPeer, its AH on the QP's PD. Lower-level than DialUD: use it on an
// endpoint whose id was resolved through ID.
func (e *UDEndpoint) Resolve(ctx context.Context, privateData []byte) (*UDPeer, error) {
	p, err := e.id.SIDR(ctx, privateData)
	if err != nil {
		return nil, err
	}
	pd := e.PD()
	if pd == nil {
		return nil, &Error{Op: "SIDR request", Kind: ErrClosed, Err: errors.New("the endpoint has no QP")}
	}
	return NewUDPeer(pd, p)
}

// SIDR sends a SIDR request (rdma_connect on a UD id) with privateData
// (at most 180 bytes) from the id, whose route is resolved, and waits for
// the answer: the remote QPN, Q_Key and address (UDParam). The id needs no
// QP of its own, so it can look up a peer for a QP it does not own.
func (id *ID) SIDR(ctx context.Context, privateData []byte) (UDParam, error) {
	if len(privateData) > 180 {
		return UDParam{}, &Error{Op: "SIDR request", Err: fmt.Errorf("%d bytes of private data, a SIDR REQ carries at most 180", len(privateData))}
	}
	if !id.ud {
		return UDParam{}, &Error{Op: "SIDR request", Err: fmt.Errorf("%v is not a UD id", id)}
	}
	if err := id.Connect(&ConnParam{PrivateData: privateData}); err != nil {
		return UDParam{}, err
	}
	ev, err := id.WaitEvent(ctx, EventEstablished)
	if err != nil {
		return UDParam{}, err
	}
	if !ev.UD {
		return UDParam{}, &Error{Op: "SIDR request", Err: errors.New("the answer is not a UD event")}
	}
	return ev.UDP, nil
}

// ID is the endpoint's rdma_cm id (for its events and queries).
func (e *UDEndpoint) ID() *ID { return e.id }

// QP is the endpoint's UD QP (RTS), owned by the endpoint.
func (e *UDEndpoint) QP() *uverbs.QP { return e.id.QP() }

// PD is the QP's protection domain: register buffers with it. Unless
// UDOptions.PD was given it is the device's shared PD (ID.Verbs), which
// goes with the last id on the device: deregister buffers before Close.
// PD, Context, SendCQ and RecvCQ are nil once the endpoint is closed.
func (e *UDEndpoint) PD() *uverbs.PD {
	if qp := e.id.QP(); qp != nil {
		return qp.PD()
	}
	return nil
}

// Context is the verbs context of the QP's device.
func (e *UDEndpoint) Context() *uverbs.Context {
	if pd := e.PD(); pd != nil {
		return pd.Context()
	}
	return nil
}

// SendCQ and RecvCQ are the QP's completion queues.
func (e *UDEndpoint) SendCQ() *uverbs.CQ {
	if qp := e.id.QP(); qp != nil {
		return qp.SendCQ()
	}
	return nil
}

func (e *UDEndpoint) RecvCQ() *uverbs.CQ {
	if qp := e.id.QP(); qp != nil {
		return qp.RecvCQ()
	}
	return nil
}

// Port is the device port the id is bound to (for AHAttrFromWC).
func (e *UDEndpoint) Port() uint8 {
	a, err := e.id.Query()
	if err != nil || a.Port == 0 {
		return 1
	}
	return a.Port
}

// QKey is the QP's Q_Key as the CM set it at INIT (UDPQKey).
func (e *UDEndpoint) QKey() uint32 {
	qp := e.id.QP()
	if qp == nil {
		return 0
	}
	a, _, err := qp.Query(uverbs.QPAttrQKey)
	if err != nil {
		return 0
	}
	return a.QKey
}

// LocalAddr is the id's bound address (QUERY ADDR).
func (e *UDEndpoint) LocalAddr() Addr {
	a, _ := e.id.Query()
	return a.Src
}

// Close leaves every group the endpoint joined, then destroys the QP, its
// CQ (if the endpoint made it), the id and the channel. It is idempotent.
func (e *UDEndpoint) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	groups := make([]*Multicast, 0, len(e.groups))
	for m := range e.groups {
		groups = append(groups, m)
	}
	e.mu.Unlock()
	var errs []error
	for _, m := range groups {
		errs = append(errs, m.Leave())
	}
	errs = append(errs, e.id.Close(), e.ch.Close())
	return errors.Join(errs...)
}

// UDListener answers SIDR requests in the UDP port space for one UD QP:
// the listening id is bound to a specific IP and carries the QP, and each
// accepted request is answered with that QP's number (as librdmacm's
// rdma_accept on a UD id does with conn_param.qp_num). Clients then send
// datagrams to it; reply to them with an AH from the receive
// (uverbs.Context.AHAttrFromWC) and the QPN they put in the immediate data
// (udaddy's convention), or learn it from your own protocol.
//
// Concurrency: Accept may be called from several goroutines (each request
// goes to one); Close rejects requests not yet answered.
type UDListener struct {
	ep *UDEndpoint
}

// SIDRRequest is one client's SIDR request: answer it with Accept or
// Reject (an unanswered request keeps the client retrying for about a
// minute; Close rejects it).
type SIDRRequest struct {
	// PrivateData is the client's data, padded by the kernel to 180 bytes.
	PrivateData []byte
	// Remote and Local are the client's and our addresses (QUERY ADDR on the
	// request's id).
	Remote, Local Addr

	l     *UDListener
	child *ID
	once  sync.Once
}

// ListenUD binds a UD endpoint to addr ("10.0.0.1:7174"; a specific IP)
// and listens for SIDR requests on its port.
func ListenUD(ctx context.Context, addr string, opts *UDOptions) (*UDListener, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	return ListenUDAddr(ctx, a, opts)
}

// ListenUDAddr is ListenUD with a parsed address.
func ListenUDAddr(ctx context.Context, a Addr, opts *UDOptions) (*UDListener, error) {
	if opts == nil {
		opts = &UDOptions{}
	}
	ep, err := OpenUDAddr(ctx, a, opts)
	if err != nil {
		return nil, relabel(err, "listen UD on "+a.String())
	}
	if err := ep.id.Listen(opts.Backlog); err != nil {
		ep.Close()
		return nil, relabel(err, "listen UD on "+a.String())
	}
	return &UDListener{ep: ep}, nil
}

// Endpoint is the listener's endpoint: its QP is the one requests are
// answered with (post receives on it before accepting: clients send at
// once).
func (l *UDListener) Endpoint() *UDEndpoint { return l.ep }

// Addr is the bound address (with the kernel's port if 0 was asked).
func (l *UDListener) Addr() Addr { return l.ep.LocalAddr() }

// Accept waits for the next SIDR request.
func (l *UDListener) Accept(ctx context.Context) (*SIDRRequest, error) {
	ev, err := l.ep.id.WaitEvent(ctx, EventConnectRequest)
	if err != nil {
		return nil, relabel(err, "accept SIDR request")
	}
	r := &SIDRRequest{PrivateData: ev.PrivateData(), l: l, child: ev.Child}
	if info, err := ev.Child.Query(); err == nil {
		r.Remote, r.Local = info.Dst, info.Src
	}
	return r, nil
}

// Accept answers the request with the listener's QPN and the CM's Q_Key
// (a SIDR REP) and privateData (≤136 bytes; the client sees 136).
func (r *SIDRRequest) Accept(privateData []byte) error {
	qp := r.l.ep.QP()
	if qp == nil {
		return &Error{Op: "accept SIDR request", Kind: ErrClosed}
	}
	return r.AcceptQPN(qp.QPN(), privateData)
}

// AcceptQPN answers the request with another QP of the UDP port space (a
// QP whose Q_Key is UDPQKey), as udaddy answers each client with its own QP.
func (r *SIDRRequest) AcceptQPN(qpn uint32, privateData []byte) error {
	if len(privateData) > 136 {
		return &Error{Op: "accept SIDR request", Err: fmt.Errorf("%d bytes of private data, a SIDR REP carries at most 136", len(privateData))}
	}
	err := errors.New("request already answered")
	r.once.Do(func() {
		err = r.child.Accept(&ConnParam{QPN: qpn, PrivateData: privateData})
		r.child.Close() // the REP has left; the child id has no further use
	})
	return err
}

// Reject answers the request with a SIDR REP of status SIDRReject and
// privateData (≤136 bytes): DialUD fails with ErrRefused and the data.
func (r *SIDRRequest) Reject(privateData []byte) error {
	if len(privateData) > 136 {
		return &Error{Op: "reject SIDR request", Err: fmt.Errorf("%d bytes of private data, a SIDR REP carries at most 136", len(privateData))}
	}
	err := errors.New("request already answered")
	r.once.Do(func() {
		err = r.child.Reject(privateData, RejectConsumerDefined)
		r.child.Close()
	})
	return err
}

// Close stops listening, rejects unanswered requests and releases the
// endpoint.
func (l *UDListener) Close() error { return l.ep.Close() }
