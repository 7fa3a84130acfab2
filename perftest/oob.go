package perftest

import (
	"bytes"
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
func (d Dest) encode(withGID bool) []byte {
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
	bad := func() (Dest, error) { return Dest{}, fmt.Errorf("couldn't parse the peer's address <%s>", s) }
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
	c        net.Conn
	client   bool
	withGID  bool
	remVer   float64
	remIbgo  bool
	deadline time.Duration
}

var errMismatch = errors.New("parameter mismatch")

// dialOOB connects to the server, retrying until timeout (perftest gives up
// at once; scripts that start both sides together race it).
func dialOOB(host string, port int, timeout time.Duration) (*oob, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	end := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			return &oob{c: c, client: true, deadline: 120 * time.Second}, nil
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("Couldn't connect to %s (retried for %v): %v", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listenOOB accepts one client and closes the listener, as perftest does.
func listenOOB(port int) (*oob, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen to port %d: %v", port, err)
	}
	defer ln.Close()
	c, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("accept on port %d: %v", port, err)
	}
	return &oob{c: c, deadline: 120 * time.Second}, nil
}

func (o *oob) Close() error { return o.c.Close() }

// xchg sends mine and receives n bytes, in perftest's order (ctx_xchg_data).
func (o *oob) xchg(mine []byte, n int) ([]byte, error) {
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
		return fmt.Errorf(" Failed to exchange data between server and clients: %v", err)
	}
	s, tail, _ := bytes.Cut(rem, []byte{0})
	o.remVer, _ = strconv.ParseFloat(string(s), 64)
	o.remIbgo = bytes.HasPrefix(tail, []byte(ibgoMarker))
	if o.remVer < 5.70 {
		return fmt.Errorf("Current implementation is not compatible with versions older than 5.70 (the peer speaks %q)", s)
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
			return fmt.Errorf(" Failed to exchange Page Size data between server and client: %v", err)
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
		return 0, fmt.Errorf(" Failed to exchange data between server and clients: %v", err)
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
}

func summarize(p *Params, withGID bool) paramSummary {
	s := paramSummary{Test: p.Test.Name(), Conn: p.Conn.String(), Size: p.Size, All: p.All, Iters: p.Iters,
		Duration: p.Duration, Bidir: p.Bidir, QPs: p.NumQPs, GID: withGID, PostList: p.PostList, RunInf: p.RunInf}
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
		return fmt.Errorf(" Failed to exchange data between server and clients: %v", err)
	}
	var theirs paramSummary
	if err := json.Unmarshal(bytes.TrimRight(rem, "\x00"), &theirs); err != nil {
		return fmt.Errorf(" the peer's parameter summary does not parse: %v", err)
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
	if len(diffs) > 0 {
		return fmt.Errorf("%w with the peer (both sides must run the same options):\n  %s", errMismatch, strings.Join(diffs, "\n  "))
	}
	return nil
}

// readKey reads one key message. A peer that uses the other key form (GID
// against no GID) is recognised and named, not waited for.
func (o *oob) readKey() (Dest, error) {
	want := keyLen
	if o.withGID {
		want = keyLenGID
	}
	buf := make([]byte, want)
	o.c.SetReadDeadline(time.Now().Add(o.deadline))
	defer o.c.SetReadDeadline(time.Time{})
	got := 0
	for got < want {
		n, err := o.c.Read(buf[got:])
		got += n
		if !o.withGID && got >= keyLen && buf[keyLen-1] != 0 {
			return Dest{}, fmt.Errorf("%w: the peer sends 108-byte keys with a GID (it uses -x or runs on RoCE) and this side sends none; use the same -x on both sides", errMismatch)
		}
		if o.withGID && got == keyLen && buf[keyLen-1] == 0 && bytes.Count(buf[:keyLen], []byte(":")) == 6 {
			// A complete no-GID key: give the rest a moment to arrive.
			o.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := io.ReadFull(o.c, buf[got:])
			if err != nil {
				return Dest{}, fmt.Errorf("%w: the peer sends 59-byte keys without a GID (no -x, InfiniBand) and this side uses GID index; use the same -x on both sides", errMismatch)
			}
			got += n
			break
		}
		if err != nil {
			if got == 0 && errors.Is(err, io.EOF) {
				return Dest{}, errors.New("ethernet_read_keys: Couldn't read remote address (the peer closed the connection)")
			}
			return Dest{}, fmt.Errorf("ethernet_read_keys: Couldn't read remote address: %v", err)
		}
	}
	return decodeDest(buf)
}

// handshake is ctx_hand_shake: one key message each way.
func (o *oob) handshake(mine Dest) (Dest, error) {
	msg := mine.encode(o.withGID)
	if o.client {
		o.c.SetWriteDeadline(time.Now().Add(o.deadline))
		if _, err := o.c.Write(msg); err != nil {
			return Dest{}, fmt.Errorf(" Unable to write to socket: %v", err)
		}
		return o.readKey()
	}
	d, err := o.readKey()
	if err != nil {
		return d, err
	}
	o.c.SetWriteDeadline(time.Now().Add(o.deadline))
	if _, err := o.c.Write(msg); err != nil {
		return Dest{}, fmt.Errorf(" Unable to write to socket: %v", err)
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
		return r, fmt.Errorf(" Failed to exchange data between server and clients: %v", err)
	}
	r.Size = binary.BigEndian.Uint64(b)
	itn := 8
	if o.remVer < 5.33 {
		itn = 4
	}
	if b, err = u(mine.Iters, itn); err != nil {
		return r, fmt.Errorf(" Failed to exchange data between server and clients: %v", err)
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
			return r, fmt.Errorf(" Failed to exchange data between server and clients: %v", err)
		}
		*f.dst = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return r, nil
}

// closeConn is ctx_close_connection: a handshake, "done", close.
func (o *oob) closeConn(mine Dest) error {
	if _, err := o.handshake(mine); err != nil {
		return err
	}
	o.c.Write([]byte("done\x00"))
	return o.c.Close()
}
