package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// errnoENOTSUPP is the kernel-internal ENOTSUPP (524) that JOIN_MCAST
// answers for an IPv6 group on RoCE (cma.c: cma_iboe_join_multicast); libc
// prints it as "Unknown error 524".
const errnoENOTSUPP = syscall.Errno(524)

// JoinOptions modify a multicast join. The zero value (or nil) joins as a
// full member: the QP is attached and receives the group's datagrams.
type JoinOptions struct {
	// SendOnly joins as a send-only full member (JOIN_MCAST flag
	// SENDONLY_FULLMEMBER): the group's AH for sending, no IGMP join, no
	// attach.
	SendOnly bool
}

// Multicast is a membership of a UD endpoint in a multicast group: the
// group's address (its MGID, ::ffff:a.b.c.d for an IPv4 group on RoCE v2),
// the peer to send to (QPN 0xFFFFFF, the group's Q_Key, an AH on the QP's
// PD) and, for full members, the QP's attachment.
//
// Concurrency: the fields are read-only; Leave and Attached may be called
// from several goroutines; Leave must not race with sends that use Peer.AH.
type Multicast struct {
	Group    netip.Addr
	MGID     uverbs.GID
	MLID     uint16
	Peer     UDPeer
	SendOnly bool

	ep     *UDEndpoint
	handle uint32 // the kernel's mc id

	mu       sync.Mutex
	attached bool
	left     bool
}

// JoinMulticast joins group ("239.1.1.1"; an IPv4 group: the kernel's CM
// has no IPv6 multicast on RoCE and answers ENOTSUPP, reported as
// uverbs.ErrNotSupported) and waits for the kernel's answer
// (MULTICAST_JOIN): it creates the group's AH on the QP's PD and, unless
// opts.SendOnly, attaches the QP (ATTACH_MCAST), as librdmacm does. The
// endpoint must be bound to a specific IP (OpenUD) or resolved. Close (or
// Leave) undoes it.
func (e *UDEndpoint) JoinMulticast(ctx context.Context, group string, opts *JoinOptions) (*Multicast, error) {
	g, err := netip.ParseAddr(group)
	if err != nil {
		return nil, &Error{Op: "join multicast " + group, Err: fmt.Errorf("not an IP address: %w", err)}
	}
	return e.JoinMulticastAddr(ctx, g, opts)
}

// JoinMulticastAddr is JoinMulticast with a parsed group address.
func (e *UDEndpoint) JoinMulticastAddr(ctx context.Context, group netip.Addr, opts *JoinOptions) (*Multicast, error) {
	if opts == nil {
		opts = &JoinOptions{}
	}
	op := "join multicast " + group.String()
	if !group.IsMulticast() {
		return nil, &Error{Op: op, Err: errors.New("not a multicast address")}
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed || e.id.QP() == nil {
		return nil, &Error{Op: op, Kind: ErrClosed}
	}
	// One join at a time waits on the id's queue, so each MULTICAST_JOIN
	// goes to the join that asked for it.
	e.joinMu.Lock()
	defer e.joinMu.Unlock()
	handle, err := e.id.joinMulticast(Addr{IP: netip.AddrPortFrom(group, 0)}, opts.SendOnly)
	if err != nil {
		return nil, relabel(err, op)
	}
	m := &Multicast{Group: group, SendOnly: opts.SendOnly, ep: e, handle: handle}
	fail := func(err error) (*Multicast, error) {
		e.id.leaveMulticast(handle)
		return nil, relabel(err, op)
	}
	ev, err := e.id.waitJoin(ctx, handle)
	if err != nil {
		return fail(err)
	}
	p := ev.UDP
	m.MGID, m.MLID = p.AH.GRH.DGID, p.AH.DLID
	peer, err := NewUDPeer(e.PD(), p)
	if err != nil {
		return fail(err)
	}
	m.Peer = *peer
	if !opts.SendOnly {
		qp := e.QP()
		if qp == nil {
			m.Peer.Close()
			return fail(&Error{Op: op, Kind: ErrClosed})
		}
		if err := qp.AttachMcast(m.MGID, m.MLID); err != nil {
			m.Peer.Close()
			return fail(err)
		}
		m.attached = true
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		m.Leave()
		return nil, &Error{Op: op, Kind: ErrClosed}
	}
	e.groups[m] = struct{}{}
	e.mu.Unlock()
	return m, nil
}

// Attached reports whether the endpoint's QP is attached to the group.
func (m *Multicast) Attached() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.attached
}

// Leave detaches the QP (full members; DETACH_MCAST), leaves the group
// (LEAVE_MCAST; the kernel sends the IGMP leave and drops the group's
// unread events) and destroys the group's AH, in librdmacm's order
// (rdma_leave_multicast). It is idempotent.
func (m *Multicast) Leave() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return nil
	}
	m.left = true
	var errs []error
	if qp := m.ep.QP(); m.attached && qp != nil {
		if err := qp.DetachMcast(m.MGID, m.MLID); err != nil {
			errs = append(errs, &Error{Op: "leave multicast " + m.Group.String(), Err: err})
		}
	}
	m.attached = false
	if err := m.ep.id.leaveMulticast(m.handle); err != nil {
		errs = append(errs, relabel(err, "leave multicast "+m.Group.String()))
	}
	errs = append(errs, m.Peer.Close())
	m.ep.mu.Lock()
	delete(m.ep.groups, m)
	m.ep.mu.Unlock()
	return errors.Join(errs...)
}

// joinMulticast is JOIN_MCAST with the id's uid, so that the group's events
// (MULTICAST_JOIN/ERROR, whose id field is the mc handle) reach this id's
// queue. It returns the kernel's mc handle.
func (id *ID) joinMulticast(group Addr, sendOnly bool) (uint32, error) {
	var flags uint16 = abi.RDMA_MC_JOIN_FLAG_FULLMEMBER
	if sendOnly {
		flags = abi.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
	}
	var perr error
	out, err := id.exec(abi.RDMA_USER_CM_CMD_JOIN_MCAST, abi.Size[abi.UcmJoinMcast](), abi.Size[abi.UcmCreateIDResp](), 0,
		func(in []byte, resp uint64, _ []byte) {
			c := abi.As[abi.UcmJoinMcast](in)
			c.Response, c.UID, c.ID, c.JoinFlags = resp, id.uid, id.handle, flags
			n, err := putSockaddr(c.Addr[:], group)
			c.AddrSize, perr = uint16(n), err
		})
	if perr != nil {
		return 0, &Error{Op: "join multicast", Err: perr}
	}
	if err != nil {
		e := cmdErr("join multicast", err).(*Error)
		if errors.Is(err, errnoENOTSUPP) {
			e.Kind = uverbs.ErrNotSupported
			e.Err = fmt.Errorf("%w (the kernel's CM has no IPv6 multicast on RoCE)", err)
		}
		return 0, e
	}
	r, _ := abi.Read[abi.UcmCreateIDResp](out)
	return r.ID, nil
}

// waitJoin waits for the answer to the join of mc handle: its
// MULTICAST_JOIN, or its MULTICAST_ERROR as the error. Any other event
// that arrives meanwhile (another group's error, ADDR_CHANGE) is not this
// join's: it goes back on the id's queue, in order, for whoever waits
// for it; a MULTICAST_JOIN of another handle is the late answer of a join
// that gave up (joins are one at a time) and is dropped. A ctx that ends
// arms no drop entry, unlike WaitEvent: the caller leaves the group, and
// LEAVE_MCAST drops the group's unread events in the kernel, so a drop
// entry would swallow the next join's answer instead (issue 30, item 5).
func (id *ID) waitJoin(ctx context.Context, handle uint32) (*Event, error) {
	var others []*Event
	defer func() { id.unshift(others) }()
	for {
		ev, err := id.next(ctx)
		if err != nil {
			return nil, &Error{Op: "wait for " + EventMulticastJoin.String(), Err: err, Kind: kindOf(err)}
		}
		switch {
		case ev.Type == EventMulticastJoin && ev.Handle == handle:
			return ev, nil
		case ev.Type == EventMulticastError && ev.Handle == handle:
			return nil, ev.Err()
		case ev.Type == EventMulticastJoin:
			// a late answer of an abandoned join: nobody waits for it
		default:
			others = append(others, ev)
		}
	}
}

// leaveMulticast is LEAVE_MCAST of the mc handle.
func (id *ID) leaveMulticast(handle uint32) error {
	if id.isClosed() {
		return nil // DESTROY_ID left every group
	}
	_, err := id.ch.Load().destroy(abi.RDMA_USER_CM_CMD_LEAVE_MCAST, handle)
	return cmdErr("leave multicast", err)
}
