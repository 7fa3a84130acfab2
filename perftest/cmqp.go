package perftest

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// -R (--rdma_cm): the test QPs are connected by rdma_cm, one connection per
// QP on the port of the exchange, which runs over rdma_cm too (-z)
// (perftest_communication.c: create_rdma_cm_connection,
// rdma_cm_client_connection, rdma_cm_server_connection):
//
//	H (zeroed keys); the server listens (backlog: the QPs) and accepts each
//	request with a QP made on the request's id, the client resolves, makes
//	the QP, connects, retrying 10 × 100 ms while the server is not yet
//	listening; H again.
//
// The QPs come up to RTS from the CM's attributes (INIT_QP_ATTR), so the
// keys exchanged afterwards only carry what the test uses (RKey, VAddr) and
// what is printed. Connection parameters: responder resources and initiator
// depth are out_reads for read and atomic tests, else 0; retry 7, RNR 7
// (--retry_count is refused). Only RC: UD over rdma_cm needs SIDR, which
// ibgo's cm package does not have yet.

// cmQPs is the -R state: the ids that own the test QPs.
type cmQPs struct {
	ch  *cm.Channel
	ids []*cm.ID
}

func (c *cmQPs) close() {
	for _, id := range c.ids {
		id.Close()
	}
	if c.ch != nil {
		c.ch.Close()
	}
}

// cmConnParam is rdma_cm_*_connection's conn_param.
func (e *engine) cmConnParam() *cm.ConnParam {
	p := &cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}
	if v := e.cfg.Test.Verb; v == Read || v == Atomic {
		p.ResponderResources, p.InitiatorDepth = uint8(e.hw.outReads), uint8(e.hw.outReads)
	}
	return p
}

// connectCMQPs makes and connects the test QPs through rdma_cm, between
// the two handshakes, and returns them (in RTS).
func (e *engine) connectCMQPs(cp uverbs.QPCap) ([]*uverbs.QP, error) {
	p := e.cfg
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, &Error{Kind: KindResource, op: opCMConnect, Err: err}
	}
	e.res.cmq.ch = ch
	attr := cm.QPInitAttr{SendCQ: e.res.sendCQ, RecvCQ: e.res.recvCQ, SRQ: e.res.srq, Cap: cp}
	var ln *cm.ID
	if p.Server == "" {
		// Listen before our half of the first handshake: the C client
		// connects as soon as it has read it.
		if ln, err = ch.CreateID(cm.PortSpaceTCP, uverbs.QPTypeRC); err == nil {
			if err = ln.Bind(cm.IPAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p.Port)))); err == nil {
				err = ln.Listen(p.NumQPs)
			}
		}
		if err != nil {
			if ln != nil {
				ln.Close()
			}
			return nil, &Error{Kind: KindResource, op: opCMConnect, Port: p.Port, Err: err}
		}
		defer ln.Close()
	}
	if _, err := e.sess.oob.handshake(Dest{}); err != nil {
		return nil, err
	}
	var qps []*uverbs.QP
	for i := 0; i < p.NumQPs; i++ {
		var id *cm.ID
		var err error
		if p.Server == "" {
			id, err = e.acceptCMQP(ln, attr)
		} else {
			id, err = e.dialCMQP(ch, attr)
		}
		if err != nil {
			return nil, &Error{Kind: KindResource, op: opCMConnect, QP: i, Err: err}
		}
		e.res.cmq.ids = append(e.res.cmq.ids, id)
		qps = append(qps, id.QP())
	}
	if _, err := e.sess.oob.handshake(Dest{}); err != nil {
		return nil, err
	}
	return qps, nil
}

// acceptCMQP is the server's side of one connection: the request's id gets
// the QP and is accepted (the QP to RTS); perftest does not wait for
// ESTABLISHED.
func (e *engine) acceptCMQP(ln *cm.ID, attr cm.QPInitAttr) (*cm.ID, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	ev, err := ln.WaitEvent(ctx, cm.EventConnectRequest)
	if err != nil {
		return nil, err
	}
	id := ev.Child
	if _, err := id.CreateQP(e.res.pd, attr); err != nil {
		id.Reject(nil, 0)
		id.Close()
		return nil, err
	}
	if err := id.Accept(e.cmConnParam()); err != nil {
		id.Close()
		return nil, err
	}
	return id, nil
}

// dialCMQP is the client's side: resolve the server's address on the
// exchange's port, make the QP, connect; a server not yet listening
// rejects, and the client tries again, 10 times 100 ms apart, as perftest.
func (e *engine) dialCMQP(ch *cm.Channel, attr cm.QPInitAttr) (*cm.ID, error) {
	p := e.cfg
	ap, err := netip.ParseAddrPort(netJoin(p.Server, p.Port))
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		id, err := ch.CreateID(cm.PortSpaceTCP, uverbs.QPTypeRC)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		err = id.Resolve(ctx, cm.Addr{}, cm.IPAddr(ap))
		if err == nil {
			_, err = id.CreateQP(e.res.pd, attr)
		}
		if err == nil {
			err = id.Connect(e.cmConnParam())
		}
		if err == nil {
			_, err = id.WaitEvent(ctx, cm.EventEstablished)
		}
		cancel()
		if err == nil {
			return id, nil
		}
		id.Close()
		if try == 10 || !errors.Is(err, cm.ErrRefused) || e.ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
