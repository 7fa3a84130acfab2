package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// ibgo rping is wire-compatible with rdma-core's rping
// (librdmacm/examples/rping.c): an RC connection through rdma_cm on port
// 7174, 16-byte control SENDs carrying {be64 addr, be32 rkey, be32 size},
// the server RDMA-READing the client's source buffer and RDMA-WRITing it
// back into the client's sink.

func init() {
	register(&cli.Command{
		Name:            "rping",
		Usage:           "RDMA CM connectivity check, wire-compatible with rping (installed as a link named rping, ibgo behaves as it)",
		UsageText:       rpingUsage,
		SkipFlagParsing: true,
		Description: "Connects through the RDMA connection manager (rdma_cm, port 7174) and ping-pongs a buffer\n" +
			"with RDMA READ and WRITE exactly as rdmacm-utils' rping does, so either side may be the C tool.\n" +
			"Installed as a link named rping, ibgo behaves as that program.\n\n" +
			"Examples:\n" +
			"   ibgo rping -s -a 10.0.0.1 -v               # server\n" +
			"   ibgo rping -c -a 10.0.0.1 -C 10 -v -V      # client: 10 pings, data verified\n" +
			"   ln -s ibgo rping && ./rping -c -a 10.0.0.1 -C 1\n\n" +
			"Environment:\n" +
			"   IBGO_CPUPROFILE   write a CPU profile of the run to this file (read it with go tool pprof)",
		Action: func(c *cli.Context) error {
			if args := c.Args().Slice(); len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				cli.HelpPrinter(c.App.Writer, cli.CommandHelpTemplate, c.Command)
				return nil
			}
			if code := runRping(c.Args().Slice(), c.App.Writer, c.App.ErrWriter); code != 0 {
				return fail(code, "")
			}
			return nil
		},
	})
}

const rpingUsage = `ibgo rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]
ibgo rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port] [-t tos]
	-c		client side
	-s		server side (-P: persistent, one goroutine per client)
	-v		display ping data to stdout
	-V		validate ping data
	-d		debug printfs
	-S size 	ping data size (26..65535, default 64)
	-C count	ping count times (client; default: forever)
	-a addr		address
	-I addr		source address to bind to for the client
	-p port		port (default 7174)
	-t tos		type of service (an ibgo extension: rdma-core 44's rping has no -t)
	-q		use a self-created QP (accepted; ibgo always manages its QP)`

// isRping reports whether ibgo was invoked through a link named rping.
func isRping(argv0 string) bool { return filepath.Base(argv0) == "rping" }

// rpingMinSize is rping.c's RPING_MIN_BUFSIZE: room for "rdma-ping-%d: "
// with the largest int, and the terminating NUL.
const (
	rpingMinSize  = 26
	rpingMaxSize  = 65535
	rpingInfoSize = 16 // struct rping_rdma_info
	rpingPort     = 7174
)

type rpingOpts struct {
	server, client, verbose, validate, debug, persistent bool
	size, count                                          int
	addr, src                                            string
	port                                                 int
	tos                                                  int
}

// parseRpingArgs is getopt("Pa:I:Cp:S:t:scvVdq") as rping.c has it, so
// "-vV", "-C10" and "-C 10" all work.
func parseRpingArgs(args []string) (*rpingOpts, error) {
	o := &rpingOpts{size: 64, port: rpingPort, tos: -1}
	withArg := "aICpSt"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return nil, fmt.Errorf("unexpected argument %q", args[i+1])
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			return nil, fmt.Errorf("unexpected argument %q", a)
		}
		for j := 1; j < len(a); j++ {
			opt := a[j]
			var val string
			if strings.IndexByte(withArg, opt) >= 0 {
				if j+1 < len(a) {
					val = a[j+1:]
				} else if i+1 < len(args) {
					i++
					val = args[i]
				} else {
					return nil, fmt.Errorf("option -%c needs a value", opt)
				}
				j = len(a)
			}
			num := func() (int, error) {
				n, err := strconv.Atoi(val)
				if err != nil {
					return 0, fmt.Errorf("option -%c: %q is not a number", opt, val)
				}
				return n, nil
			}
			var err error
			switch opt {
			case 's':
				o.server = true
			case 'c':
				o.client = true
			case 'v':
				o.verbose = true
			case 'V':
				o.validate = true
			case 'd':
				o.debug = true
			case 'P':
				o.persistent = true
			case 'q':
			case 'a':
				o.addr = val
			case 'I':
				o.src = val
			case 'p':
				o.port, err = num()
				if err == nil && (o.port < 0 || o.port > 65535) {
					err = fmt.Errorf("port %d out of range", o.port)
				}
			case 'C':
				o.count, err = num()
				if err == nil && o.count < 0 {
					err = fmt.Errorf("invalid count %d", o.count)
				}
			case 'S':
				o.size, err = num()
				if err == nil && (o.size < rpingMinSize || o.size > rpingMaxSize) {
					err = fmt.Errorf("Invalid size %d (valid range is %d to %d)", o.size, rpingMinSize, rpingMaxSize)
				}
			case 't':
				o.tos, err = num()
				if err == nil && (o.tos < 0 || o.tos > 255) {
					err = fmt.Errorf("invalid tos %d", o.tos)
				}
			default:
				err = fmt.Errorf("unknown option -%c", opt)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if o.server == o.client {
		return nil, errors.New("give exactly one of -s (server) and -c (client)")
	}
	if o.client && o.addr == "" {
		return nil, errors.New("the client needs -a addr")
	}
	return o, nil
}

// rpingInfo is struct rping_rdma_info: where a buffer is and how to reach it.
type rpingInfo struct {
	addr uint64
	rkey uint32
	size uint32
}

func (r rpingInfo) encode(b []byte) {
	binary.BigEndian.PutUint64(b[0:], r.addr)
	binary.BigEndian.PutUint32(b[8:], r.rkey)
	binary.BigEndian.PutUint32(b[12:], r.size)
}

// parseRpingInfo decodes a received control message; rping accepts exactly
// 16 bytes ("Received bogus data, size N" otherwise).
func parseRpingInfo(b []byte) (rpingInfo, error) {
	if len(b) != rpingInfoSize {
		return rpingInfo{}, fmt.Errorf("Received bogus data, size %d", len(b))
	}
	return rpingInfo{addr: binary.BigEndian.Uint64(b), rkey: binary.BigEndian.Uint32(b[8:]), size: binary.BigEndian.Uint32(b[12:])}, nil
}

// rpingFill writes ping number n's source buffer as rping_test_client does:
// "rdma-ping-%d: " then letters cycling from 'A'+start to 'z', NUL last.
func rpingFill(b []byte, n int, start byte) {
	cc := copy(b, fmt.Sprintf("rdma-ping-%d: ", n))
	c := start
	for i := cc; i < len(b); i++ {
		b[i] = c
		c++
		if c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// cstr is b up to its first NUL (what printf("%s") prints).
func cstr(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

func runRping(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runRpingCtx(ctx, args, stdout, stderr)
}

// runRpingCtx runs rping until it is done or ctx ends (Ctrl-C).
func runRpingCtx(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseRpingArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "rping: %v\n%s\n", err, rpingUsage)
		return int(syscall.EINVAL)
	}
	if o.server {
		err = rpingServer(ctx, o, stdout, stderr)
	} else {
		err = rpingClient(ctx, o, stdout, stderr)
	}
	if err != nil {
		var ce *cm.Error
		var quiet *rpingExit
		if errors.As(err, &quiet) {
			// already reported
		} else if errors.As(err, &ce) && ce.Event != 0 {
			fmt.Fprintf(stderr, "cma event %s, error %d\n", ce.Event, ce.Status)
		} else {
			fmt.Fprintf(stderr, "rping: %v\n", err)
		}
		return 255 // rping's exit(-1)
	}
	return 0
}

// rpingConn is one connection's buffers: recv, send (control messages),
// rdma (the server's read target and the client's sink) and start (the
// client's source), in one registered region.
type rpingConn struct {
	c     *cm.Conn
	mem   *uverbs.Memory
	mr    *uverbs.MR
	cc    *uverbs.CompChannel
	cq    *uverbs.CQ
	size  int
	debug io.Writer
}

const (
	rpRecv  = 0
	rpSend  = 64
	rpRDMA  = 128
	wrRecv  = 1
	wrSend  = 2
	wrRDMA  = 3
	rpDepth = 16
)

func (r *rpingConn) rdma() []byte  { return r.mem.Bytes()[rpRDMA : rpRDMA+r.size] }
func (r *rpingConn) start() []byte { return r.mem.Bytes()[rpRDMA+r.size : rpRDMA+2*r.size] }

// setup registers the buffers on the connection's PD and posts the receive
// (from BeforeConnect / BeforeAccept, before the peer can send).
func (r *rpingConn) setup(c *cm.Conn) error {
	r.c, r.cq, r.cc = c, c.RecvCQ(), c.CompChannel()
	var err error
	if r.mem, err = uverbs.AllocMemory(rpRDMA+2*r.size, uverbs.MemoryOptions{}); err != nil {
		return err
	}
	if r.mr, err = c.PD().RegMR(r.mem.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite); err != nil {
		return err
	}
	return r.postRecv()
}

func (r *rpingConn) postRecv() error {
	_, err := r.c.QP().PostRecv([]uverbs.RecvWR{{WRID: wrRecv, SGL: []uverbs.SGE{r.mr.SGE(rpRecv, rpingInfoSize)}}})
	return err
}

// close deregisters the buffers (no more DMA into them), closes the
// connection (QP, CQ, id), then frees the memory.
func (r *rpingConn) close() {
	if r.mr != nil {
		r.mr.Close()
	}
	if r.c != nil {
		r.c.Close()
	}
	if r.mem != nil {
		r.mem.Close()
	}
}

// next waits for one completion: it polls, arms the CQ, polls again and
// sleeps on the completion channel (no busy loop). A flushed completion
// (the peer disconnected, the QP went to ERR) is cm.ErrDisconnected.
func (r *rpingConn) next(ctx context.Context) (uverbs.WC, error) {
	wc := make([]uverbs.WC, 1)
	for {
		n, err := r.cq.Poll(wc)
		if err != nil {
			return uverbs.WC{}, err
		}
		if n == 0 {
			if err := r.cq.ReqNotify(false); err != nil {
				return uverbs.WC{}, err
			}
			if n, err = r.cq.Poll(wc); err != nil {
				return uverbs.WC{}, err
			}
		}
		if n == 1 {
			if wc[0].Status == uverbs.WCWRFlushErr {
				return wc[0], cm.ErrDisconnected
			}
			if wc[0].Status != uverbs.WCSuccess {
				return wc[0], fmt.Errorf("cq completion failed status %d", wc[0].Status)
			}
			return wc[0], nil
		}
		if _, err := r.cc.GetEvent(ctx); err != nil {
			return uverbs.WC{}, err
		}
		r.cq.AckEvents(1)
	}
}

// waitRecv waits for the next receive (send completions in between are
// counted off), reposts the receive and returns the message.
func (r *rpingConn) waitRecv(ctx context.Context) (rpingInfo, error) {
	for {
		wc, err := r.next(ctx)
		if err != nil {
			return rpingInfo{}, err
		}
		if wc.WRID != wrRecv {
			continue
		}
		info, err := parseRpingInfo(r.mem.Bytes()[rpRecv : rpRecv+int(wc.ByteLen)])
		if err != nil {
			return info, err
		}
		return info, r.postRecv()
	}
}

// waitWR waits for the completion of work request wrid.
func (r *rpingConn) waitWR(ctx context.Context, wrid uint64) error {
	for {
		wc, err := r.next(ctx)
		if err != nil {
			return err
		}
		if wc.WRID == wrid {
			return nil
		}
	}
}

func (r *rpingConn) send(info rpingInfo) error {
	info.encode(r.mem.Bytes()[rpSend:])
	_, err := r.c.QP().PostSend([]uverbs.SendWR{{WRID: wrSend, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{r.mr.SGE(rpSend, rpingInfoSize)}}})
	return err
}

func rpingAddr(s string, port int) (cm.Addr, error) {
	a, err := cm.ParseAddr(s)
	if err != nil {
		return a, err
	}
	a.IP = netipWithPort(a, port)
	return a, nil
}

func rpingClient(ctx context.Context, o *rpingOpts, stdout, stderr io.Writer) error {
	dst, err := rpingAddr(o.addr, o.port)
	if err != nil {
		return err
	}
	r := &rpingConn{size: o.size}
	defer r.close()
	d := cm.Dialer{
		Cap: uverbs.QPCap{MaxSendWR: rpDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1},
		// rping.c: responder resources and initiator depth 1 (the C server
		// reads our buffer with that depth), retry 7, RNR retry 7.
		Param: &cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7},
	}
	if o.src != "" {
		if d.Source, err = cm.ParseAddr(o.src); err != nil {
			return err
		}
	}
	if o.tos >= 0 {
		t := uint8(o.tos)
		d.TOS = &t
	}
	d.BeforeConnect = func(c *cm.Conn) error { return r.setup(c) }
	if _, err := d.Dial(ctx, dst); err != nil {
		return err
	}
	go func() { // DISCONNECTED from the server flushes our waits
		if r.c.WaitDisconnect(ctx) == nil && o.debug {
			fmt.Fprintln(stderr, "client DISCONNECT EVENT...")
		}
	}()
	start := byte(65)
	for ping := 0; o.count == 0 || ping < o.count; ping++ {
		rpingFill(r.start(), ping, start)
		start++
		if start > 122 {
			start = 65
		}
		if err := r.send(rpingInfo{addr: r.mr.Addr() + uint64(rpRDMA+r.size), rkey: r.mr.RKey(), size: uint32(r.size)}); err != nil {
			return err
		}
		if _, err := r.waitRecv(ctx); err != nil { // the server has read our source
			return fmt.Errorf("wait for RDMA_WRITE_ADV: %w", err)
		}
		if err := r.send(rpingInfo{addr: r.mr.Addr() + rpRDMA, rkey: r.mr.RKey(), size: uint32(r.size)}); err != nil {
			return err
		}
		if _, err := r.waitRecv(ctx); err != nil { // the server has written our sink
			return fmt.Errorf("wait for RDMA_WRITE_COMPLETE: %w", err)
		}
		if o.validate && !bytes.Equal(r.start(), r.rdma()) {
			fmt.Fprintln(stderr, "data mismatch!")
			return &rpingExit{}
		}
		if o.verbose {
			fmt.Fprintf(stdout, "ping data: %s\n", cstr(r.rdma()))
		}
	}
	return nil
}

// rpingExit is a failure already reported on stderr.
type rpingExit struct{}

func (*rpingExit) Error() string { return "" }

func netipWithPort(a cm.Addr, port int) netip.AddrPort {
	return netip.AddrPortFrom(a.IP.Addr(), uint16(port))
}

// rpingServer serves one client (every client with -P, each on its own
// goroutine) as rping_test_server does.
func rpingServer(ctx context.Context, o *rpingOpts, stdout, stderr io.Writer) error {
	addr := o.addr
	if addr == "" {
		addr = "0.0.0.0"
	}
	la, err := rpingAddr(addr, o.port)
	if err != nil {
		return err
	}
	var out sync.Mutex // one goroutine prints at a time (-P)
	// Accept runs one at a time here, so the connection BeforeAccept set up
	// is the one Accept returns (or failed on).
	var cur *rpingConn
	lc := cm.ListenConfig{
		Backlog: 3,
		Cap:     uverbs.QPCap{MaxSendWR: rpDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1},
		BeforeAccept: func(c *cm.Conn) error {
			cur = &rpingConn{size: o.size}
			return cur.setup(c)
		},
	}
	l, err := lc.Listen(la)
	if err != nil {
		return err
	}
	defer l.Close()
	serve := func(r *rpingConn) error {
		defer r.close()
		go func() {
			if r.c.WaitDisconnect(ctx) == nil {
				out.Lock()
				fmt.Fprintln(stderr, "server DISCONNECT EVENT...")
				out.Unlock()
			}
		}()
		err := rpingServe(ctx, r, o, stdout, &out)
		if errors.Is(err, cm.ErrDisconnected) {
			out.Lock()
			fmt.Fprintf(stderr, "wait for RDMA_READ_ADV state %d\n", 10) // rping's DISCONNECTED state
			out.Unlock()
			return nil
		}
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		cur = nil
		_, err := l.Accept(ctx)
		r := cur
		if err != nil {
			if r != nil {
				r.c = nil // Accept closed it
				r.close()
			}
			if o.persistent && ctx.Err() != nil {
				return nil // Ctrl-C ends a persistent server
			}
			if !o.persistent {
				return err
			}
			fmt.Fprintf(stderr, "rping: %v\n", err)
			continue
		}
		if !o.persistent {
			return serve(r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(r); err != nil {
				out.Lock()
				fmt.Fprintf(stderr, "rping: %v\n", err)
				out.Unlock()
			}
		}()
	}
}

// rpingServe is one connection's loop: wait for the client's source,
// RDMA READ it, go-ahead; wait for the sink, RDMA WRITE it, go-ahead.
func rpingServe(ctx context.Context, r *rpingConn, o *rpingOpts, stdout io.Writer, out *sync.Mutex) error {
	for {
		src, err := r.waitRecv(ctx)
		if err != nil {
			return err
		}
		if int(src.size) > r.size {
			return fmt.Errorf("the client's buffer of %d bytes is larger than ours (-S %d)", src.size, r.size)
		}
		if _, err := r.c.QP().PostSend([]uverbs.SendWR{{WRID: wrRDMA, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{r.mr.SGE(rpRDMA, int(src.size))}, RemoteAddr: src.addr, RKey: src.rkey}}); err != nil {
			return err
		}
		if err := r.waitWR(ctx, wrRDMA); err != nil {
			return err
		}
		if o.verbose {
			out.Lock()
			fmt.Fprintf(stdout, "server ping data: %s\n", cstr(r.rdma()))
			out.Unlock()
		}
		if err := r.send(rpingInfo{}); err != nil { // go ahead (rping sends its zeroed send buffer)
			return err
		}
		sink, err := r.waitRecv(ctx)
		if err != nil {
			return err
		}
		n := min(len(cstr(r.rdma()))+1, r.size)
		if _, err := r.c.QP().PostSend([]uverbs.SendWR{{WRID: wrRDMA, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{r.mr.SGE(rpRDMA, n)}, RemoteAddr: sink.addr, RKey: sink.rkey}}); err != nil {
			return err
		}
		if err := r.waitWR(ctx, wrRDMA); err != nil {
			return err
		}
		if err := r.send(rpingInfo{}); err != nil {
			return err
		}
	}
}
