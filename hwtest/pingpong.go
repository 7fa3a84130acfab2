package hwtest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// PingPong speaks the protocol of rdma-core's ibv_rc_pingpong and
// ibv_ud_pingpong (libibverbs/examples), so a Go peer can run against the C
// programs in either role: the two sides swap "LID:QPN:PSN:GID" in one
// 52-byte ASCII line over TCP (default port 18515), the client answers with
// "done", and then they ping-pong Iters sends of Size bytes.
type PingPong struct {
	Dev      string
	Port     uint8 // IB port, 1
	GIDIndex int   // local GID index (-g); RoCE needs one
	Size     int   // message size (RC default 4096, UD 1024)
	Iters    int   // exchanges (1000)
	RxDepth  int   // receives kept posted (500)
	MTU      uverbs.MTU
	UD       bool
	// Check, if set, is called with every received payload.
	Check func(payload []byte) error
}

// PingPongResult reports a finished run.
type PingPongResult struct {
	Sent, Received int
	Remote         uverbs.Endpoint
	Elapsed        time.Duration
}

const ppMsgLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// encodeDest formats an endpoint as the C programs do (pingpong.c:
// gid_to_wire_gid): lid, qpn and psn in hex, then the GID's 16 bytes as 32
// hex digits, NUL-terminated.
func encodeDest(e uverbs.Endpoint) []byte {
	s := fmt.Sprintf("%04x:%06x:%06x:%s", e.LID, e.QPN, e.PSN, hex.EncodeToString(e.GID[:]))
	b := make([]byte, ppMsgLen)
	copy(b, s)
	return b
}

func decodeDest(b []byte) (uverbs.Endpoint, error) {
	s := strings.TrimRight(string(b), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return uverbs.Endpoint{}, fmt.Errorf("pingpong: malformed peer address %q", s)
	}
	var e uverbs.Endpoint
	lid, err1 := strconv.ParseUint(f[0], 16, 16)
	qpn, err2 := strconv.ParseUint(f[1], 16, 24)
	psn, err3 := strconv.ParseUint(f[2], 16, 24)
	g, err4 := hex.DecodeString(f[3])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("pingpong: malformed peer address %q: %v", s, err)
	}
	e.LID, e.QPN, e.PSN = uint16(lid), uint32(qpn), uint32(psn)
	copy(e.GID[:], g)
	return e, nil
}

// Pattern fills b as the C client does with -c (validate_buf): 0x7b, with a
// zero at the start of every page, which the C server checks at the end.
func Pattern(b []byte) {
	for i := range b {
		b[i] = 0x7b
	}
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 0
	}
}

type ppCtx struct {
	cfg      PingPong
	ctx      *uverbs.Context
	pd       *uverbs.PD
	cq       *uverbs.CQ
	qp       *uverbs.QP
	ah       *uverbs.AH
	mem      *uverbs.Memory
	mr       *uverbs.MR
	local    uverbs.Endpoint
	recvSlot int
}

func (c *PingPong) defaults() {
	if c.Port == 0 {
		c.Port = 1
	}
	if c.Size == 0 {
		c.Size = 4096
		if c.UD {
			c.Size = 1024
		}
	}
	if c.Iters == 0 {
		c.Iters = 1000
	}
	if c.RxDepth == 0 {
		c.RxDepth = 500
	}
	if c.MTU == 0 {
		c.MTU = uverbs.MTU1024
	}
}

func (c PingPong) setup() (*ppCtx, error) {
	p := &ppCtx{cfg: c}
	var err error
	if p.ctx, err = uverbs.Open(c.Dev); err != nil {
		return nil, err
	}
	fail := func(err error) (*ppCtx, error) { p.close(); return nil, err }
	if p.pd, err = p.ctx.AllocPD(); err != nil {
		return fail(err)
	}
	p.recvSlot = c.Size
	if c.UD {
		p.recvSlot = c.Size + 40
	}
	// One receive slot per outstanding receive, plus the send buffer.
	if p.mem, err = uverbs.AllocMemory(p.recvSlot*(c.RxDepth+1), uverbs.MemoryOptions{}); err != nil {
		return fail(err)
	}
	Pattern(p.mem.Bytes()[p.recvSlot*c.RxDepth:])
	if p.mr, err = p.pd.RegMR(p.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return fail(err)
	}
	if p.cq, err = p.ctx.CreateCQ(uverbs.CQInitAttr{CQE: c.RxDepth + 1}); err != nil {
		return fail(err)
	}
	typ := uverbs.QPTypeRC
	if c.UD {
		typ = uverbs.QPTypeUD
	}
	if p.qp, err = p.pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(c.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return fail(err)
	}
	if err := p.qp.Init(p.params()); err != nil {
		return fail(err)
	}
	gids, err := p.ctx.QueryGIDTable()
	if err != nil {
		return fail(err)
	}
	for _, g := range gids {
		if int(g.Index) == c.GIDIndex && g.Port == uint32(c.Port) {
			p.local.GID = g.GID
		}
	}
	if p.local.GID.IsZero() {
		return fail(fmt.Errorf("pingpong: %s port %d has no GID at index %d", c.Dev, c.Port, c.GIDIndex))
	}
	var r [4]byte
	rand.Read(r[:])
	p.local.QPN, p.local.PSN = p.qp.QPN(), binary.LittleEndian.Uint32(r[:])&0xffffff
	for i := 0; i < c.RxDepth; i++ {
		if err := p.postRecv(i); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

func (p *ppCtx) params() uverbs.ConnectParams {
	return uverbs.ConnectParams{Port: p.cfg.Port, SGIDIndex: uint8(p.cfg.GIDIndex), MTU: p.cfg.MTU, QKey: 0x11111111,
		Access: uverbs.AccessLocalWrite, HopLimit: 1}
}

func (p *ppCtx) postRecv(slot int) error {
	_, err := p.qp.PostRecv([]uverbs.RecvWR{{WRID: uint64(slot), SGL: []uverbs.SGE{p.mr.SGE(slot*p.recvSlot, p.recvSlot)}}})
	return err
}

// connect mirrors pp_connect_ctx of the C programs.
func (p *ppCtx) connect(remote uverbs.Endpoint) error {
	if err := p.qp.Connect(remote, p.local.PSN, p.params()); err != nil {
		return err
	}
	if p.cfg.UD {
		ah, err := p.pd.CreateAH(uverbs.AHAttr{IsGlobal: true, Port: p.cfg.Port, DLID: remote.LID,
			GRH: uverbs.GlobalRoute{DGID: remote.GID, SGIDIndex: uint8(p.cfg.GIDIndex), HopLimit: 1}})
		if err != nil {
			return err
		}
		p.ah = ah
	}
	return nil
}

const sendWRID = ^uint64(0)

func (p *ppCtx) postSend(remote uverbs.Endpoint) error {
	wr := uverbs.SendWR{WRID: sendWRID, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{p.mr.SGE(p.recvSlot*p.cfg.RxDepth, p.cfg.Size)}}
	if p.cfg.UD {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = p.ah, remote.QPN, 0x11111111
	}
	_, err := p.qp.PostSend([]uverbs.SendWR{wr})
	return err
}

// run is the loop of the C programs' main: a send may go out when both the
// previous send and a receive completed; the client sends first.
func (p *ppCtx) run(ctx context.Context, remote uverbs.Endpoint, client bool) (*PingPongResult, error) {
	res := &PingPongResult{Remote: remote}
	start := time.Now()
	const pendSend, pendRecv = 1, 2
	pending := pendRecv
	if client {
		if err := p.postSend(remote); err != nil {
			return res, err
		}
		pending |= pendSend
	}
	wc := make([]uverbs.WC, 16)
	for idle := 0; res.Sent < p.cfg.Iters || res.Received < p.cfg.Iters; {
		n, err := p.cq.Poll(wc)
		if err != nil {
			return res, err
		}
		if n == 0 {
			idle++
			if idle > 100 {
				if err := ctx.Err(); err != nil {
					return res, fmt.Errorf("pingpong: %w after %d sends, %d receives", err, res.Sent, res.Received)
				}
				time.Sleep(20 * time.Microsecond)
			}
			continue
		}
		idle = 0
		for _, w := range wc[:n] {
			if w.Status != uverbs.WCSuccess {
				return res, fmt.Errorf("pingpong: completion of wr %d failed: %s (after %d sends, %d receives)",
					w.WRID, w.Status, res.Sent, res.Received)
			}
			if w.WRID == sendWRID {
				res.Sent++
				pending &^= pendSend
			} else {
				slot := int(w.WRID)
				payload := p.mem.Bytes()[slot*p.recvSlot : slot*p.recvSlot+int(w.ByteLen)]
				if p.cfg.UD {
					payload = payload[min(40, len(payload)):]
				}
				if p.cfg.Check != nil {
					if err := p.cfg.Check(payload); err != nil {
						return res, fmt.Errorf("pingpong: receive %d: %w", res.Received, err)
					}
				}
				res.Received++
				pending &^= pendRecv
				if err := p.postRecv(slot); err != nil {
					return res, err
				}
			}
			if res.Sent < p.cfg.Iters && pending == 0 {
				if err := p.postSend(remote); err != nil {
					return res, err
				}
				pending = pendSend | pendRecv
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func (p *ppCtx) close() {
	// Close methods accept nil receivers, so a half-built context unwinds.
	p.ah.Close()
	p.qp.Close()
	p.cq.Close()
	p.mr.Close()
	p.pd.Close()
	if p.mem != nil {
		p.mem.Close()
	}
	p.ctx.Close()
}

// Server accepts one client on ln and runs the exchange.
func (c PingPong) Server(ctx context.Context, ln net.Listener) (*PingPongResult, error) {
	c.defaults()
	p, err := c.setup()
	if err != nil {
		return nil, err
	}
	defer p.close()
	if d, ok := ctx.Deadline(); ok {
		if tl, ok := ln.(*net.TCPListener); ok {
			tl.SetDeadline(d)
		}
	}
	conn, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("pingpong: accept: %w", err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	msg := make([]byte, ppMsgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return nil, fmt.Errorf("pingpong: reading the client's address: %w", err)
	}
	remote, err := decodeDest(msg)
	if err != nil {
		return nil, err
	}
	if err := p.connect(remote); err != nil {
		return nil, err
	}
	if _, err := conn.Write(encodeDest(p.local)); err != nil {
		return nil, err
	}
	done := make([]byte, len("done")+1)
	if _, err := io.ReadFull(conn, done); err != nil || string(done[:4]) != "done" {
		return nil, fmt.Errorf("pingpong: no \"done\" from the client (%q, %v)", done, err)
	}
	conn.SetDeadline(time.Time{})
	return p.run(ctx, remote, false)
}

// Client connects to a server at addr (host:port), retrying until ctx ends,
// and runs the exchange.
func (c PingPong) Client(ctx context.Context, addr string) (*PingPongResult, error) {
	c.defaults()
	p, err := c.setup()
	if err != nil {
		return nil, err
	}
	defer p.close()
	var conn net.Conn
	for {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pingpong: connecting to %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	if _, err := conn.Write(encodeDest(p.local)); err != nil {
		return nil, err
	}
	msg := make([]byte, ppMsgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return nil, fmt.Errorf("pingpong: reading the server's address: %w", err)
	}
	if _, err := conn.Write([]byte("done\x00")); err != nil {
		return nil, err
	}
	remote, err := decodeDest(msg)
	if err != nil {
		return nil, err
	}
	if err := p.connect(remote); err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return p.run(ctx, remote, true)
}
