package perftest

import (
	"context"
	"errors"
	"fmt"
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
// depth are out_reads for read and atomic tests, else 0; retry and RNR retry
// --retry_count (7). -T sets the client ids' TOS before route resolution
// (rdma_cm_address_handler). The server then sets min_rnr_timer 12 on RC
// QPs (IBV_QP_MIN_RNR_TIMER alone, an RTS→RTS modify).
//
// UD (-c UD) uses the UDP port space: the client's CONNECT is a SIDR
// request and its ESTABLISHED carries the server's QPN, the Q_Key of the
// port space (cm.UDPQKey, 0x01234567, also the INIT Q_Key of both QPs) and
// the AH attributes; the client sends with those, not with the exchanged
// QPN and perftest's 0x11111111 (rdma_cm_establish_ud_connection,
// ctx_set_send_reg_wqes). For send_bw in one direction nothing else is
// exchanged; the latency and bidirectional tests' SEND_WITH_IMM address
// exchange (rdma_cm_send_ud_connection_parameters) is not done, and Check
// refuses those.

// cmQPs is the -R state: the ids that own the test QPs and, on a UD
// client, each QP's peer (QPN, Q_Key and the AH, which resources.ahs owns).
type cmQPs struct {
	ch    *cm.Channel
	ids   []*cm.ID
	peers []cm.UDParam
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
	// conn_param's counts are u8s: perftest's int is truncated as C does.
	rc := uint8(e.cfg.RetryCount)
	p := &cm.ConnParam{RetryCount: rc, RNRRetryCount: rc}
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
		ps, typ := e.cmSpace()
		if ln, err = ch.CreateID(ps, typ); err == nil {
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
			id, err = e.acceptCMQP(ln, attr, i)
		} else {
			id, err = e.dialCMQP(ch, attr, i)
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
func (e *engine) acceptCMQP(ln *cm.ID, attr cm.QPInitAttr, i int) (*cm.ID, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	ev, err := ln.WaitEvent(ctx, cm.EventConnectRequest)
	if err != nil {
		return nil, err
	}
	id := ev.Child
	qp, err := id.CreateQP(e.res.pd, attr)
	if err != nil {
		id.Reject(nil, 0)
		id.Close()
		return nil, err
	}
	if e.udAddrExchange() {
		if err := e.postUDAddrRecv(qp, i); err != nil {
			id.Reject(nil, 0)
			id.Close()
			return nil, err
		}
	}
	if err := id.Accept(e.cmConnParam()); err != nil {
		id.Close()
		return nil, err
	}
	if e.udAddrExchange() {
		if err := e.recvUDAddr(i); err != nil {
			id.Close()
			return nil, err
		}
	}
	if e.cfg.Conn == RC {
		// rdma_cm_connection_request_handler: ibv_modify_qp(min_rnr_timer
		// = MIN_RNR_TIMER, IBV_QP_MIN_RNR_TIMER) after the accept.
		if err := qp.Modify(&uverbs.QPAttr{MinRNRTimer: minRNRTimer}, uverbs.QPAttrMinRNRTimer); err != nil {
			id.Close()
			return nil, fmt.Errorf("set min_rnr_timer %d on QPN %#x: %w", minRNRTimer, qp.QPN(), err)
		}
	}
	return id, nil
}

// minRNRTimer is perftest's MIN_RNR_TIMER (12: 0.64 ms).
const minRNRTimer = 12

// cmSpace is the port space and QP type of the -R ids
// (rdma_cm_allocate_nodes: RDMA_PS_UDP for UD, else RDMA_PS_TCP).
func (e *engine) cmSpace() (cm.PortSpace, uverbs.QPType) {
	if e.cfg.Conn == UD {
		return cm.PortSpaceUDP, uverbs.QPTypeUD
	}
	return cm.PortSpaceTCP, uverbs.QPTypeRC
}

// dialCMQP is the client's side: resolve the server's address on the
// exchange's port, make the QP, connect; a server not yet listening
// rejects, and the client tries again, 10 times 100 ms apart, as perftest.
func (e *engine) dialCMQP(ch *cm.Channel, attr cm.QPInitAttr, i int) (*cm.ID, error) {
	p := e.cfg
	ap, err := netip.ParseAddrPort(netJoin(p.Server, p.Port))
	if err != nil {
		return nil, err
	}
	ps, typ := e.cmSpace()
	for try := 1; ; try++ {
		id, err := ch.CreateID(ps, typ)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		if p.TOS >= 0 {
			err = id.SetTOS(uint8(p.TOS))
		}
		if err == nil {
			err = id.Resolve(ctx, cm.Addr{}, cm.IPAddr(ap))
		}
		if err == nil {
			_, err = id.CreateQP(e.res.pd, attr)
		}
		if err == nil {
			err = id.Connect(e.cmConnParam())
		}
		var ev *cm.Event
		if err == nil {
			ev, err = id.WaitEvent(ctx, cm.EventEstablished)
		}
		if err == nil && p.Conn == UD {
			err = e.addUDPeer(ev)
			if err == nil && e.udAddrExchange() {
				err = e.sendUDAddr(id.QP(), i)
			}
		}
		cancel()
		if err == nil {
			return id, nil
		}
		id.Close()
		// RC: REJECTED while the server is not listening yet; UD: the SIDR
		// REP's "no such service" (UNREACHABLE).
		again := errors.Is(err, cm.ErrRefused) || (p.Conn == UD && errors.Is(err, cm.ErrUnreachable))
		if try == 10 || !again || e.ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addUDPeer keeps the server's QPN and Q_Key from a UD ESTABLISHED and
// creates its AH on the test's PD (rdma_cm_establish_ud_connection).
func (e *engine) addUDPeer(ev *cm.Event) error {
	if !ev.UD {
		return errors.New("the SIDR answer carries no UD parameters")
	}
	ah, err := e.res.pd.CreateAH(ev.UDP.AH)
	if err != nil {
		return fmt.Errorf("AH for the server's QPN %#x: %w", ev.UDP.QPN, err)
	}
	e.res.ahs = append(e.res.ahs, ah)
	e.res.cmq.peers = append(e.res.cmq.peers, ev.UDP)
	return nil
}

// udAddrExchange says whether the server needs the client's address: UD
// latency and bidirectional tests.
func (e *engine) udAddrExchange() bool {
	return e.cfg.Conn == UD && (e.cfg.Test.Kind == LAT || e.cfg.Bidir)
}

// udAddrLen is UD_ADDITION (the GRH) plus the 4 bytes perftest sends.
const udAddrLen = uverbs.GRHLen + 4

// postUDAddrRecv posts the receive for the client's SEND_WITH_IMM at QP i's
// buffer (wr_id 0).
func (e *engine) postUDAddrRecv(qp *uverbs.QP, i int) error {
	wr := []uverbs.RecvWR{{SGL: []uverbs.SGE{e.res.mr.SGE(i*e.res.bufSize, udAddrLen)}}}
	var err error
	if e.res.srq != nil {
		_, err = e.res.srq.PostRecv(wr)
	} else {
		_, err = qp.PostRecv(wr)
	}
	if err != nil {
		return fmt.Errorf("post the receive for the client's UD address: %w", err)
	}
	return nil
}

// pollOne waits for one completion on cq (perftest busy-polls without a
// bound; ibgo gives up after 60 s or when the run is cancelled).
func (e *engine) pollOne(cq *uverbs.CQ, what string) (uverbs.WC, error) {
	wc := make([]uverbs.WC, 1)
	end := time.Now().Add(60 * time.Second)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			return wc[0], fmt.Errorf("%s: %w", what, err)
		}
		if n == 1 {
			if wc[0].Status != uverbs.WCSuccess || wc[0].WRID != 0 {
				return wc[0], fmt.Errorf("%s: bad completion: status %s, wr_id %d", what, wc[0].Status, wc[0].WRID)
			}
			return wc[0], nil
		}
		if err := e.ctx.Err(); err != nil {
			return wc[0], fmt.Errorf("%s: %w", what, err)
		}
		if time.Now().After(end) {
			return wc[0], fmt.Errorf("%s: no completion in 60 s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// recvUDAddr takes the client's SEND_WITH_IMM for QP i: the AH from the
// completion and the GRH in front of it, the QPN from the immediate data,
// and the QP's own Q_Key (the CM's).
func (e *engine) recvUDAddr(i int) error {
	const what = "receive the client's UD address"
	wc, err := e.pollOne(e.res.recvCQ, what)
	if err != nil {
		return err
	}
	if wc.Opcode != uverbs.WCRecv || wc.Flags&uverbs.WCWithImm == 0 {
		return fmt.Errorf("%s: completion opcode %s without immediate data", what, wc.Opcode)
	}
	base := i * e.res.bufSize
	attr, err := e.hw.ctx.AHAttrFromWC(uint8(e.cfg.IBPort), &wc, e.res.mem.Bytes()[base:base+uverbs.GRHLen])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ah, err := e.res.pd.CreateAH(attr)
	if err != nil {
		return fmt.Errorf("%s: AH: %w", what, err)
	}
	e.res.ahs = append(e.res.ahs, ah)
	e.res.cmq.peers = append(e.res.cmq.peers, cm.UDParam{QPN: wc.Imm, QKey: cm.UDPQKey, AH: attr})
	return nil
}

// sendUDAddr sends the server our QPN in a 4-byte SEND_WITH_IMM through QP
// i's peer and waits for its completion.
func (e *engine) sendUDAddr(qp *uverbs.QP, i int) error {
	peer, ah := e.res.cmq.peers[len(e.res.cmq.peers)-1], e.res.ahs[len(e.res.ahs)-1]
	wr := []uverbs.SendWR{{Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: qp.QPN(),
		SGL: []uverbs.SGE{e.res.mr.SGE(i*e.res.bufSize, 4)}, AH: ah, RemoteQPN: peer.QPN, RemoteQKey: peer.QKey}}
	if _, err := qp.PostSend(wr); err != nil {
		return fmt.Errorf("send our UD address: %w", err)
	}
	_, err := e.pollOne(e.res.sendCQ, "send our UD address")
	return err
}
