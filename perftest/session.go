package perftest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// The out-of-band exchange of perftest 4.5 over TCP
// (perftest_communication.c), byte for byte: every message has a fixed size,
// the client writes first and the server reads first, and each message goes
// out in a single write (the C side reads each with one read(2)).

// protoVersion is what ibgo advertises: at least 5.70 (older peers are
// refused by newer ones) and below 6.28, so the build-dependent binary
// negotiation struct of perftest 26.01+ is skipped.
const protoVersion = "6.06"

// ibgoMarker follows the version's NUL: C peers ignore it (they atof the
// string), ibgo peers recognise each other and also exchange their test
// parameters, so a mismatch is reported instead of hanging.
const ibgoMarker = "ibgo1"

const (
	versionLen = 16
	keyLen     = 59  // KEY_MSG_SIZE
	keyLenGID  = 108 // KEY_MSG_SIZE_GID
	paramsLen  = 512 // ibgo-only parameter summary
)

// Dest is one QP's address as the peers exchange it (struct pingpong_dest).
type Dest struct {
	LID      uint16
	OutReads int
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	GID      uverbs.GID
	SRQN     uint32
}

// encode renders the key message: perftest_communication.h KEY_PRINT_FMT
// (59 bytes) or KEY_PRINT_FMT_GID (108 bytes), NUL included.
// keyForm is which of perftest's two key messages a side sends.
type keyForm bool

const (
	keyNoGID   keyForm = false // 59 bytes: InfiniBand without -x
	keyWithGID keyForm = true  // 108 bytes: RoCE, or -x
)

func (d Dest) encode(form keyForm) []byte {
	withGID := form == keyWithGID
	var s string
	if !withGID {
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%08x", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, d.SRQN)
	} else {
		var g strings.Builder
		for i, b := range d.GID {
			if i > 0 {
				g.WriteByte(':')
			}
			fmt.Fprintf(&g, "%02x", b)
		}
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%s:%08x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, g.String(), d.SRQN)
	}
	n := keyLen
	if withGID {
		n = keyLenGID
	}
	b := make([]byte, n)
	copy(b, s)
	return b
}

// decodeDest parses either key form.
func decodeDest(b []byte) (Dest, error) {
	s := string(bytes.TrimRight(b, "\x00"))
	f := strings.Split(strings.TrimSuffix(s, ":"), ":")
	var d Dest
	bad := func() (Dest, error) { return Dest{}, &Error{Kind: KindSession, op: opParseKey, Text: s} }
	hex := func(i, bits int) uint64 {
		if i >= len(f) {
			return 0
		}
		v, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			f = nil
		}
		return v
	}
	switch len(f) {
	case 7:
	case 23:
	default:
		return bad()
	}
	d.LID = uint16(hex(0, 16))
	d.OutReads = int(hex(1, 16))
	d.QPN = uint32(hex(2, 24))
	d.PSN = uint32(hex(3, 24))
	d.RKey = uint32(hex(4, 32))
	d.VAddr = hex(5, 64)
	if len(f) == 23 {
		for i := 0; i < 16; i++ {
			d.GID[i] = byte(hex(6+i, 8))
		}
		d.SRQN = uint32(hex(22, 32))
	} else {
		d.SRQN = uint32(hex(6, 32))
	}
	if f == nil {
		return bad()
	}
	return d, nil
}

// oob is the control connection.
type oob struct {
	c        net.Conn // TCP; nil with cm
	cm       *cmLink  // -z/-R: the rdma_cm control channel
	gidIndex int      // the key struct's gid_index over rdma_cm
	client   bool
	withGID  bool
	remVer   float64
	remIbgo  bool
	deadline time.Duration
}

// dialOOB connects to the server, retrying until timeout (perftest gives up
// at once; scripts that start both sides together race it).
func dialOOB(ctx context.Context, host string, port int, timeout time.Duration) (*oob, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	end := time.Now().Add(timeout)
	for {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return &oob{c: c, client: true, deadline: 120 * time.Second}, nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return nil, &Error{Kind: KindSession, op: opDial, Addr: addr, Text: timeout.String(), Err: err}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listenOOB accepts one client and closes the listener, as perftest does.
func listenOOB(ctx context.Context, port int) (*oob, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return nil, &Error{Kind: KindSession, op: opListen, Port: port, Err: err}
	}
	defer ln.Close()
	// A cancelled context ends the wait for the client.
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &Error{Kind: KindSession, op: opAccept, Port: port, Err: err}
	}
	return &oob{c: c, deadline: 120 * time.Second}, nil
}

func (o *oob) Close() error {
	if o.cm != nil {
		return o.cm.Close()
	}
	return o.c.Close()
}

// xchg sends mine and receives n bytes, in perftest's order (ctx_xchg_data).
func (o *oob) xchg(mine []byte, n int) ([]byte, error) {
	if o.cm != nil {
		return o.xchgCM(mine, n)
	}
	rem := make([]byte, n)
	o.c.SetDeadline(time.Now().Add(o.deadline))
	defer o.c.SetDeadline(time.Time{})
	if o.client {
		if _, err := o.c.Write(mine); err != nil {
			return nil, err
		}
	}
	if _, err := io.ReadFull(o.c, rem); err != nil {
		return nil, err
	}
	if !o.client {
		if _, err := o.c.Write(mine); err != nil {
			return nil, err
		}
	}
	return rem, nil
}

// versions exchanges the 16-byte version strings and refuses peers older
// than 5.70 (check_version_compatibility).
func (o *oob) versions() error {
	mine := make([]byte, versionLen)
	copy(mine, protoVersion)
	copy(mine[len(protoVersion)+1:], ibgoMarker)
	rem, err := o.xchg(mine, versionLen)
	if err != nil {
		return &Error{Kind: KindSession, op: opExchange, Err: err}
	}
	s, tail, _ := bytes.Cut(rem, []byte{0})
	o.remVer, _ = strconv.ParseFloat(string(s), 64)
	o.remIbgo = bytes.HasPrefix(tail, []byte(ibgoMarker))
	if o.remVer < 5.70 {
		return &Error{Kind: KindMismatch, op: opVersion, Text: string(s)}
	}
	return nil
}

// sysData exchanges page size and cache line size (big-endian ints); both
// sides take the larger of each (check_sys_data).
func (o *oob) sysData(pageSize, cacheLine *int) error {
	if o.remVer < 5.32 {
		return nil
	}
	for _, v := range []*int{pageSize, cacheLine} {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(*v))
		rem, err := o.xchg(b[:], 4)
		if err != nil {
			return &Error{Kind: KindSession, op: opSysData, Err: err}
		}
		if r := int(int32(binary.BigEndian.Uint32(rem))); r > *v {
			*v = r
		}
	}
	return nil
}

// mtu exchanges the MTU enum as ASCII and keeps the smaller (check_mtu).
func (o *oob) mtu(local uverbs.MTU) (uverbs.MTU, error) {
	if o.remVer < 5.1 {
		return local, nil
	}
	n := 4
	if o.remVer >= 5.31 {
		n = 2
	}
	mine := make([]byte, n)
	copy(mine, strconv.Itoa(int(local)))
	rem, err := o.xchg(mine, n)
	if err != nil {
		return 0, &Error{Kind: KindSession, op: opExchange, Err: err}
	}
	r, _ := strconv.Atoi(string(bytes.TrimRight(rem, "\x00")))
	if r >= 1 && r <= 5 && uverbs.MTU(r) < local {
		return uverbs.MTU(r), nil
	}
	return local, nil
}

// paramSummary is what two ibgo peers compare. perftest 4.5 checks none of
// this, and a mismatch shows up as a hang or a remote access error.
type paramSummary struct {
	Test     string `json:"test"`
	Conn     string `json:"connection"`
	Size     int    `json:"size"`
	All      bool   `json:"all_sizes"`
	Iters    int    `json:"iterations"`
	Duration int    `json:"duration"`
	Bidir    bool   `json:"bidirectional"`
	QPs      int    `json:"qps"`
	GID      bool   `json:"gid"`
	PostList int    `json:"post_list"`
	Atomic   string `json:"atomic_type,omitempty"`
	RunInf   bool   `json:"run_infinitely"`
	Mcast    bool   `json:"mcast,omitempty"`
}

func summarize(p *Config, form keyForm) paramSummary {
	withGID := form == keyWithGID
	s := paramSummary{Test: p.Test.Name(), Conn: p.Conn.String(), Size: p.Size, All: p.All, Iters: p.Iters,
		Duration: p.Duration, Bidir: p.Bidir, QPs: p.NumQPs, GID: withGID, PostList: p.PostList, RunInf: p.RunInf, Mcast: p.Mcast}
	if p.Test.Verb == Atomic {
		s.Atomic = map[bool]string{false: "FETCH_AND_ADD", true: "CMP_AND_SWAP"}[p.AtomicCAS]
	}
	return s
}

// compareParams runs only between ibgo peers.
func (o *oob) compareParams(mine paramSummary) error {
	if !o.remIbgo {
		return nil
	}
	b, _ := json.Marshal(mine)
	buf := make([]byte, paramsLen)
	copy(buf, b)
	rem, err := o.xchg(buf, paramsLen)
	if err != nil {
		return &Error{Kind: KindSession, op: opExchange, Err: err}
	}
	var theirs paramSummary
	if err := json.Unmarshal(bytes.TrimRight(rem, "\x00"), &theirs); err != nil {
		return &Error{Kind: KindMismatch, op: opParamsParse, Err: err}
	}
	var diffs []string
	add := func(name string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			diffs = append(diffs, fmt.Sprintf("%s: this side %v, the peer %v", name, a, b))
		}
	}
	add("test", mine.Test, theirs.Test)
	add("connection type (-c)", mine.Conn, theirs.Conn)
	add("message size (-s)", mine.Size, theirs.Size)
	add("all sizes (-a)", mine.All, theirs.All)
	add("iterations (-n)", mine.Iters, theirs.Iters)
	add("duration (-D)", mine.Duration, theirs.Duration)
	add("bidirectional (-b)", mine.Bidir, theirs.Bidir)
	add("number of QPs (-q)", mine.QPs, theirs.QPs)
	add("GID in use (-x)", mine.GID, theirs.GID)
	add("post list (-l)", mine.PostList, theirs.PostList)
	add("atomic type (-A)", mine.Atomic, theirs.Atomic)
	add("run infinitely", mine.RunInf, theirs.RunInf)
	add("multicast (-g)", mine.Mcast, theirs.Mcast)
	if len(diffs) > 0 {
		return &Error{Kind: KindMismatch, op: opParams, Diffs: diffs}
	}
	return nil
}

// readKey reads one key message, waiting at most wait (0: no limit). A
// peer that uses the other key form (GID against no GID) is recognised and
// named, not waited for.
func (o *oob) readKey(wait time.Duration) (Dest, error) {
	want := keyLen
	if o.withGID {
		want = keyLenGID
	}
	buf := make([]byte, want)
	if wait > 0 {
		o.c.SetReadDeadline(time.Now().Add(wait))
	}
	defer o.c.SetReadDeadline(time.Time{})
	got := 0
	for got < want {
		n, err := o.c.Read(buf[got:])
		got += n
		if !o.withGID && got >= keyLen && buf[keyLen-1] != 0 {
			return Dest{}, &Error{Kind: KindMismatch, op: opKeyForm, Text: "the peer sends 108-byte keys with a GID (it uses -x or runs on RoCE) and this side sends none; use the same -x on both sides"}
		}
		if o.withGID && got == keyLen && buf[keyLen-1] == 0 && bytes.Count(buf[:keyLen], []byte(":")) == 6 {
			// A complete no-GID key: give the rest a moment to arrive.
			o.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := io.ReadFull(o.c, buf[got:])
			if err != nil {
				return Dest{}, &Error{Kind: KindMismatch, op: opKeyForm, Text: "the peer sends 59-byte keys without a GID (no -x, InfiniBand) and this side uses GID index; use the same -x on both sides"}
			}
			got += n
			break
		}
		if err != nil {
			if got == 0 && errors.Is(err, io.EOF) {
				return Dest{}, &Error{Kind: KindSession, op: opReadKey}
			}
			return Dest{}, &Error{Kind: KindSession, op: opReadKey, Err: err}
		}
	}
	return decodeDest(buf)
}

// handshake is ctx_hand_shake: one key message each way. The peer must
// answer within o.deadline: it is in the same phase of setup.
func (o *oob) handshake(mine Dest) (Dest, error) { return o.handshakeWait(mine, o.deadline) }

// barrier is ctx_hand_shake used as the barrier around and after the data
// phase: the peer may still be running its whole test (-D 600, a large -n;
// the BW server of write/read/atomic waits here for all of it), so the read
// has no deadline, as perftest's has none. A cancelled context closes the
// connection (establish) and a peer that exits closes it too: either ends
// the read.
func (o *oob) barrier(mine Dest) (Dest, error) { return o.handshakeWait(mine, 0) }

func (o *oob) handshakeWait(mine Dest, wait time.Duration) (Dest, error) {
	if o.cm != nil {
		return o.handshakeCM(mine, wait)
	}
	msg := mine.encode(keyForm(o.withGID))
	if o.client {
		o.c.SetWriteDeadline(time.Now().Add(o.deadline))
		if _, err := o.c.Write(msg); err != nil {
			return Dest{}, &Error{Kind: KindSession, op: opWriteKey, Err: err}
		}
		return o.readKey(wait)
	}
	d, err := o.readKey(wait)
	if err != nil {
		return d, err
	}
	o.c.SetWriteDeadline(time.Now().Add(o.deadline))
	if _, err := o.c.Write(msg); err != nil {
		return Dest{}, &Error{Kind: KindSession, op: opWriteKey, Err: err}
	}
	return d, nil
}

// bwReport is struct bw_report_data's exchanged part.
type bwReport struct {
	Size    uint64
	Iters   uint64
	Peak    float64
	Avg     float64
	MsgRate float64
}

// reports is xchg_bw_reports: five 8-byte rounds, big-endian, doubles
// byte-swapped.
func (o *oob) reports(mine bwReport) (bwReport, error) {
	var r bwReport
	u := func(v uint64, n int) ([]byte, error) {
		b := make([]byte, 8)
		if n == 4 {
			binary.BigEndian.PutUint32(b, uint32(v))
			return o.xchg(b[:4], 4)
		}
		binary.BigEndian.PutUint64(b, v)
		return o.xchg(b, 8)
	}
	b, err := u(mine.Size, 8)
	if err != nil {
		return r, &Error{Kind: KindSession, op: opExchange, Err: err}
	}
	r.Size = binary.BigEndian.Uint64(b)
	itn := 8
	if o.remVer < 5.33 {
		itn = 4
	}
	if b, err = u(mine.Iters, itn); err != nil {
		return r, &Error{Kind: KindSession, op: opExchange, Err: err}
	}
	if itn == 4 {
		r.Iters = uint64(binary.BigEndian.Uint32(b))
	} else {
		r.Iters = binary.BigEndian.Uint64(b)
	}
	for _, f := range []struct {
		mine float64
		dst  *float64
	}{{mine.Peak, &r.Peak}, {mine.Avg, &r.Avg}, {mine.MsgRate, &r.MsgRate}} {
		if b, err = u(math.Float64bits(f.mine), 8); err != nil {
			return r, &Error{Kind: KindSession, op: opExchange, Err: err}
		}
		*f.dst = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return r, nil
}

// closeConn is ctx_close_connection: a handshake, "done", close. The
// handshake is a barrier: the passive side of a latency test reaches it
// while the peer still runs the test.
func (o *oob) closeConn(mine Dest) error {
	if _, err := o.barrier(mine); err != nil {
		return err
	}
	if o.cm != nil {
		// perftest writes no "done" over rdma_cm and keeps the
		// connection until it exits (ctx_close_connection).
		return nil
	}
	o.c.Write([]byte("done\x00"))
	return o.c.Close()
}

// establish runs the control exchange up to the key messages (perftest main:
// establish_connection, exchange_versions, check_sys_data, check_mtu).
func (e *engine) establish() error {
	p := e.cfg
	var err error
	switch {
	case p.Server == "" && p.CommCM:
		e.waitBanner()
		e.sess.oob, err = listenCM(e.ctx, p.Port)
	case p.Server == "":
		e.waitBanner()
		e.sess.oob, err = listenOOB(e.ctx, p.Port)
	case p.CommCM:
		e.sess.oob, err = dialCM(e.ctx, p.Server, p.Port, time.Duration(p.ConnectFor)*time.Second)
	default:
		e.sess.oob, err = dialOOB(e.ctx, p.Server, p.Port, time.Duration(p.ConnectFor)*time.Second)
	}
	if err != nil {
		return err
	}
	// A cancelled context ends any exchange or loop: the exchange's read
	// fails, the loops' watchdog sees it (see peerGoneCheck).
	e.sess.stopCancel = context.AfterFunc(e.ctx, func() { e.sess.oob.Close() })
	e.sess.oob.withGID = e.hw.withGID
	e.sess.oob.gidIndex = p.GIDIndex
	e.startWatchdog()
	if p.DontXchg {
		return &Error{Kind: KindConfig, op: opDontXchg}
	}
	if err := e.sess.oob.versions(); err != nil {
		return err
	}
	if err := e.sess.oob.sysData(&e.hw.pageSize, &e.hw.cacheLine); err != nil {
		return err
	}
	if e.hw.mtu, err = e.sess.oob.mtu(e.hw.mtu); err != nil {
		return err
	}
	if p.Conn == UD && p.Size > e.hw.mtu.Bytes() {
		if p.All || !p.SizeGiven {
			fmt.Fprintf(e.pr.errw, " Max msg size in UD is MTU %d\n Changing to this MTU\n", e.hw.mtu.Bytes())
			p.Size = e.hw.mtu.Bytes()
		} else {
			return &Error{Kind: KindConfig, op: opUDSize, Value: e.hw.mtu.Bytes()}
		}
	}
	return e.sess.oob.compareParams(summarize(p, keyForm(e.hw.withGID)))
}

func (e *engine) waitBanner() {
	if e.cfg.Output == OutputFull && !e.cfg.JSON {
		fmt.Fprint(e.pr.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
}

// checkGIDs fails when one side uses an IPv4-mapped GID and the other not
// (ctx_check_gid_compatibility).
func (e *engine) checkGIDs() error {
	if !e.hw.withGID {
		return nil
	}
	v4 := func(g uverbs.GID) bool { return g.IP().To4() != nil }
	if v4(e.sess.local[0].GID) != v4(e.sess.remote[0].GID) {
		return &Error{Kind: KindMismatch, op: opGIDTypes, Text: fmt.Sprintf("local GID %s, remote GID %s", e.sess.local[0].GID, e.sess.remote[0].GID)}
	}
	return nil
}

// session is the out-of-band side of a run: the control connection, each
// QP's address on both sides, and the watchdog on the connection.
type session struct {
	oob        *oob
	local      []Dest
	remote     []Dest
	wd         watchdog
	stopCancel func() bool // unregisters the context's close of oob
}

// preamble is the shape of the exchange before the data phase, which
// differs per test (perftest's mains); both sides must make the same
// handshakes in the same order.
type preamble struct {
	LeadingHS      bool // a handshake before the key exchange (latency tests but send_lat)
	HSAfterConnect bool // a handshake between connecting and printing the addresses (send tests)
	TrailingHS     bool // a handshake after the addresses are printed (all but send tests)
}

func (e *engine) runPreamble(pa preamble) error {
	if pa.LeadingHS {
		if err := e.hs(); err != nil {
			return err
		}
	}
	if err := e.keys(keysQuiet); err != nil {
		return err
	}
	// -R: rdma_cm brought the QPs up already, and perftest checks no GIDs.
	if !e.cfg.WorkCM {
		if err := e.checkGIDs(); err != nil {
			return err
		}
		e.joinSender()
		if err := e.connect(); err != nil {
			return err
		}
	}
	if pa.HSAfterConnect {
		if err := e.hs(); err != nil {
			return err
		}
	}
	for _, d := range e.sess.local {
		e.printDest("local", d)
	}
	if err := e.keys(keysPrinted); err != nil {
		return err
	}
	if pa.TrailingHS {
		return e.hs()
	}
	return nil
}

type keysMode int

const (
	keysQuiet   keysMode = iota // the first exchange: learn the peer's addresses
	keysPrinted                 // the second: print them (ctx_print_pingpong_data)
)

// keys exchanges every QP's key (H×Q) and keeps the remote ones.
func (e *engine) keys(mode keysMode) error {
	e.sess.remote = make([]Dest, len(e.sess.local))
	for i := range e.sess.local {
		d, err := e.sess.oob.handshake(e.sess.local[i])
		if err != nil {
			return err
		}
		e.sess.remote[i] = d
		if mode == keysPrinted {
			e.printDest("remote", d)
		}
	}
	return nil
}

// hs is one ctx_hand_shake of the setup (the preamble), with a deadline.
func (e *engine) hs() error {
	_, err := e.sess.oob.handshake(e.sess.local[0])
	return err
}

// sync is one ctx_hand_shake around or after the data phase: a barrier
// without a deadline (oob.barrier).
func (e *engine) sync() error {
	_, err := e.sess.oob.barrier(e.sess.local[0])
	return err
}

func (e *engine) closeConn() error { return e.sess.oob.closeConn(e.sess.local[0]) }

// lingerMax bounds how long write_lat -D waits for its peer to finish.
const lingerMax = 10 * time.Second

// linger keeps the QP (and so the peer's last RDMA write) alive until the
// peer is done. write_lat -D has no closing exchange: each side stops on its
// own clock, and a side that exits first takes its QP with it while the
// other may still wait for the completion of a write it just posted (the
// kernel acks it only while the QP exists, and rxe never gives up with
// retry-exceeded: perftest then spins forever). So, like a TCP lingering
// close: say we are done (half-close), then wait for the peer to close its
// side (perftest: when it exits; ibgo: when it lingers too), at most max.
func (e *engine) linger(max time.Duration) {
	tc, ok := e.sess.oob.c.(*net.TCPConn)
	if !ok {
		return
	}
	tc.CloseWrite()
	tc.SetReadDeadline(time.Now().Add(max))
	var b [64]byte
	for {
		if _, err := tc.Read(b[:]); err != nil {
			return
		}
	}
}
