package perftest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// The rdma_cm control channel (-z, --comm_rdma_cm; also under -R): instead
// of TCP, one RC connection made with rdma_cm on the same port
// (perftest_communication.c: rdma_client_connect, rdma_server_connect,
// create_comm_struct). Each message of the exchange is one SEND of exactly
// its size; the receiver keeps one receive posted and reposts it after
// each message (rdma_read_data, rdma_write_data). The order is TCP's: in
// each exchange the client sends first. The key messages are not perftest's
// ASCII but the raw struct pingpong_dest, big-endian (rdma_write_keys):
//
//	int lid, out_reads, qpn, psn; u32 rkey; 4 bytes pad; u64 vaddr @24;
//	u8 gid[16] @32; u32 srqn @48; int gid_index @52   (56 bytes)
//
// perftest 4.5's reader keeps srqn and gid_index in network order, and uses
// neither. perftest 6.29 sends 64 bytes and breaks this exchange with 4.5
// (perftest-brief.md §1.8); ibgo speaks 4.5's.

const (
	cmDestLen = 56   // sizeof(struct pingpong_dest), v4.5
	cmBufLen  = 1024 // the receive: any perftest message, and ibgo's parameter summary
	cmWRID    = 1    // SYNC_SPEC_ID
)

// cmLink is the control channel over an rdma_cm RC connection. Used by the
// test's goroutine only (and Close from the context's AfterFunc).
type cmLink struct {
	conn *cm.Conn
	ln   *cm.Listener
	mem  *uverbs.Memory
	mr   *uverbs.MR
	wc   [1]uverbs.WC
	// The Conn has one CQ for both directions: a completion of the kind
	// the current wait does not want is kept here (the peer's reply can
	// complete before our own SEND's completion is polled, 6.12 rxe
	// completes sends from a work queue).
	recvWC    uverbs.WC
	haveRecv  bool
	sendsSeen int
	gone      atomic.Bool // the peer disconnected (its process ended)
}

// watch notices the peer's disconnect (its kernel disconnects when the
// process ends) for the loops' dead-peer check, which has no TCP socket
// to look at here.
func (l *cmLink) watch(c *cm.Conn) {
	go func() {
		if c.WaitDisconnect(context.Background()) == nil {
			l.gone.Store(true)
		}
	}()
}

// buffers: the first half receives, the second sends.
func (l *cmLink) recvBuf() []byte { return l.mr.Bytes()[:cmBufLen] }
func (l *cmLink) sendBuf() []byte { return l.mr.Bytes()[cmBufLen:] }

func (l *cmLink) register(c *cm.Conn) error {
	var err error
	if l.mem, err = uverbs.AllocMemory(2*cmBufLen, uverbs.MemoryOptions{}); err != nil {
		return err
	}
	if l.mr, err = c.PD().RegMR(l.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	return l.postRecv(c)
}

func (l *cmLink) postRecv(c *cm.Conn) error {
	_, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: cmWRID, SGL: []uverbs.SGE{l.mr.SGE(0, cmBufLen)}}})
	return err
}

var cmCap = uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}

// dialCM connects the control channel to host:port, retrying while nobody
// listens there yet (perftest tries once).
func dialCM(ctx context.Context, host string, port int, timeout time.Duration) (*oob, error) {
	addr := netJoin(host, port)
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, &Error{Kind: KindSession, op: opDial, Addr: addr, Text: timeout.String(), Err: fmt.Errorf("rdma_cm needs an IP address: %w", err)}
	}
	end := time.Now().Add(timeout)
	for {
		l := &cmLink{}
		d := cm.Dialer{Cap: cmCap, BeforeConnect: l.register}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := d.Dial(dctx, cm.IPAddr(ap))
		cancel()
		if err == nil {
			l.conn = c
			l.watch(c)
			return &oob{cm: l, client: true, deadline: 120 * time.Second}, nil
		}
		l.free()
		retry := errors.Is(err, cm.ErrRefused) || errors.Is(err, cm.ErrUnreachable) || errors.Is(err, cm.ErrTimeout)
		if !retry || time.Now().After(end) || ctx.Err() != nil {
			return nil, &Error{Kind: KindSession, op: opDial, Addr: addr, Text: timeout.String(), Err: err}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listenCM accepts one client on the port and closes the listener, as
// perftest does (which frees the port for -R's test connections).
func listenCM(ctx context.Context, port int) (*oob, error) {
	l := &cmLink{}
	lc := cm.ListenConfig{Backlog: 1, Cap: cmCap, BeforeAccept: l.register}
	ln, err := lc.Listen(cm.IPAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port))))
	if err != nil {
		return nil, &Error{Kind: KindSession, op: opListen, Port: port, Err: err}
	}
	if cmListening != nil {
		cmListening(port)
	}
	c, err := ln.Accept(ctx)
	ln.Close()
	if err != nil {
		l.free()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &Error{Kind: KindSession, op: opAccept, Port: port, Err: err}
	}
	l.conn = c
	l.watch(c)
	return &oob{cm: l, deadline: 120 * time.Second}, nil
}

// cmListening, when set (tests), learns that an rdma_cm control listener
// is up: it is not a TCP socket a test could see.
var cmListening func(port int)

func netJoin(host string, port int) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() && !a.Is4In6() {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

func (l *cmLink) free() {
	l.mr.Close()
	l.mem.Close()
	l.mr, l.mem = nil, nil
}

// Close ends the connection (the peer's pending read fails) and frees.
func (l *cmLink) Close() error {
	var err error
	if l.conn != nil {
		err = l.conn.Close()
	}
	l.free()
	return err
}

// send posts msg as one SEND and waits for its completion.
func (l *cmLink) send(msg []byte, wait time.Duration) error {
	if len(msg) > cmBufLen {
		return fmt.Errorf("control message of %d bytes, more than %d", len(msg), cmBufLen)
	}
	copy(l.sendBuf(), msg)
	wr := []uverbs.SendWR{{WRID: cmWRID, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{l.mr.SGE(cmBufLen, len(msg))}}}
	if _, err := l.conn.QP().PostSend(wr); err != nil {
		return err
	}
	return l.poll(l.conn.SendCQ(), wait, "send", uverbs.WCSend)
}

// recv waits for the next message (at most wait; 0: no limit) and returns
// its bytes, then reposts the receive.
func (l *cmLink) recv(wait time.Duration) ([]byte, error) {
	if err := l.poll(l.conn.RecvCQ(), wait, "receive", uverbs.WCRecv); err != nil {
		return nil, err
	}
	n := int(l.wc[0].ByteLen)
	msg := append([]byte(nil), l.recvBuf()[:n]...)
	if err := l.postRecv(l.conn); err != nil {
		return nil, err
	}
	return msg, nil
}

// poll waits for one completion on cq. The control exchange is not a hot
// path: it backs off to 1 ms sleeps, and a barrier may wait for the whole
// test.
func (l *cmLink) poll(cq *uverbs.CQ, wait time.Duration, what string, want uverbs.WCOpcode) error {
	var end time.Time
	if wait > 0 {
		end = time.Now().Add(wait)
	}
	for spins := 0; ; spins++ {
		// A completion of this kind seen by an earlier wait.
		if want == uverbs.WCRecv && l.haveRecv {
			l.wc[0], l.haveRecv = l.recvWC, false
			return nil
		}
		if want == uverbs.WCSend && l.sendsSeen > 0 {
			l.sendsSeen--
			return nil
		}
		n, err := cq.Poll(l.wc[:])
		if err != nil {
			return err
		}
		if n == 1 {
			if l.wc[0].Status != uverbs.WCSuccess {
				return fmt.Errorf("control %s completed with %s", what, l.wc[0].Status)
			}
			if l.wc[0].Opcode == want {
				return nil
			}
			// The other direction's completion: keep it for its wait.
			if l.wc[0].Opcode == uverbs.WCRecv {
				l.recvWC, l.haveRecv = l.wc[0], true
			} else {
				l.sendsSeen++
			}
			continue
		}
		if !end.IsZero() && time.Now().After(end) {
			return fmt.Errorf("control %s: nothing for %v", what, wait)
		}
		if spins > 1000 {
			time.Sleep(time.Millisecond)
		}
	}
}

// encodeCMDest renders d as perftest 4.5's struct pingpong_dest.
func encodeCMDest(d Dest, gidIndex int) []byte {
	b := make([]byte, cmDestLen)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.LID))
	be.PutUint32(b[4:], uint32(d.OutReads))
	be.PutUint32(b[8:], d.QPN)
	be.PutUint32(b[12:], d.PSN)
	be.PutUint32(b[16:], d.RKey)
	be.PutUint64(b[24:], d.VAddr)
	copy(b[32:48], d.GID[:])
	be.PutUint32(b[48:], d.SRQN)
	be.PutUint32(b[52:], uint32(int32(gidIndex)))
	return b
}

// decodeCMDest reads a struct pingpong_dest (rdma_read_keys).
func decodeCMDest(b []byte) (Dest, error) {
	if len(b) < cmDestLen {
		return Dest{}, fmt.Errorf("a %d-byte key message, want %d (a peer newer than perftest 6.28 sends 64)", len(b), cmDestLen)
	}
	be := binary.BigEndian
	d := Dest{LID: uint16(be.Uint32(b[0:])), OutReads: int(int32(be.Uint32(b[4:]))), QPN: be.Uint32(b[8:]) & 0xffffff,
		PSN: be.Uint32(b[12:]) & 0xffffff, RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:]), SRQN: be.Uint32(b[48:])}
	copy(d.GID[:], b[32:48])
	return d, nil
}

// xchgCM is ctx_xchg_data_rdma: the client sends, then receives; the
// server the other way round.
func (o *oob) xchgCM(mine []byte, n int) ([]byte, error) {
	l := o.cm
	if o.client {
		if err := l.send(mine, o.deadline); err != nil {
			return nil, err
		}
	}
	rem, err := l.recv(o.deadline)
	if err != nil {
		return nil, err
	}
	if len(rem) < n {
		return nil, fmt.Errorf("the peer sent %d bytes, want %d", len(rem), n)
	}
	if !o.client {
		if err := l.send(mine, o.deadline); err != nil {
			return nil, err
		}
	}
	return rem[:n], nil
}

// handshakeCM is ctx_hand_shake over rdma_cm (rdma_write_keys,
// rdma_read_keys).
func (o *oob) handshakeCM(mine Dest, wait time.Duration) (Dest, error) {
	l := o.cm
	msg := encodeCMDest(mine, o.gidIndex)
	read := func() (Dest, error) {
		b, err := l.recv(wait)
		if err != nil {
			return Dest{}, &Error{Kind: KindSession, op: opReadKey, Err: err}
		}
		d, err := decodeCMDest(b)
		if err != nil {
			return Dest{}, &Error{Kind: KindSession, op: opReadKey, Err: err}
		}
		return d, nil
	}
	if o.client {
		if err := l.send(msg, o.deadline); err != nil {
			return Dest{}, &Error{Kind: KindSession, op: opWriteKey, Err: err}
		}
		return read()
	}
	d, err := read()
	if err != nil {
		return d, err
	}
	if err := l.send(msg, o.deadline); err != nil {
		return Dest{}, &Error{Kind: KindSession, op: opWriteKey, Err: err}
	}
	return d, nil
}
