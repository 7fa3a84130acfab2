//go:build linux

package ib_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/inspect"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/ib"
)

// startIB starts a driver serving aeron:ib with its own medium.
func startIB(t *testing.T, mod func(*driver.Config)) (*driver.Driver, *ib.Media) {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.TermBufferLength = 1 << 20
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	m := ib.New()
	d, err := driver.Start(cfg, driver.WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, m
}

func connectTo(t *testing.T, d *driver.Driver) *client.Client {
	c, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// receiver checks that messages (sequence numbers in the first 8 bytes)
// arrive once and in order from first on.
type receiver struct {
	sub   *client.Subscription
	first int // -1: take the first message's number
	next  int
	bad   error
	fh    logbuffer.FragmentHandler
}

func newReceiver(sub *client.Subscription, first int) *receiver {
	r := &receiver{sub: sub, first: first, next: first}
	r.fh = func(payload []byte, _ *logbuffer.Header) {
		got := int(binary.LittleEndian.Uint64(payload))
		if r.next < 0 {
			r.first, r.next = got, got
		}
		if got != r.next && r.bad == nil {
			r.bad = fmt.Errorf("message %d arrived where %d was due: out of order, lost or duplicated", got, r.next)
		}
		r.next++
	}
	r.fh = client.NewFragmentAssembler(r.fh).Handler() // messages longer than the mtu arrive whole
	return r
}

func (r *receiver) count() int { return r.next - r.first }

// until polls until n messages arrived (or the limit passes).
func (r *receiver) until(n int, limit time.Duration) error {
	end := time.Now().Add(limit)
	for r.next < 0 || r.count() < n {
		if r.sub.Poll(r.fh, 256) == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		if r.bad != nil {
			return r.bad
		}
		if time.Now().After(end) {
			return fmt.Errorf("received %d of %d", max(r.count(), 0), n)
		}
	}
	return nil
}

// offerAll offers messages from..to-1 of 256 bytes, retrying on back
// pressure.
func offerAll(t *testing.T, pub *client.Publication, from, to int, limit time.Duration) {
	offerSized(t, pub, from, to, 256, limit)
}

// offerSized offers messages from..to-1 of size bytes (sequence number
// first), retrying on back pressure.
func offerSized(t *testing.T, pub *client.Publication, from, to, size int, limit time.Duration) {
	msg := make([]byte, size)
	end := time.Now().Add(limit)
	for i := from; i < to; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if pub.Offer(msg) > 0 {
			i++
		} else {
			time.Sleep(20 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering: at %d of %d", i, to)
	}
}

func systemCounter(t *testing.T, d *driver.Driver, label string) int64 {
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	r, err := f.Counters()
	require.NoError(t, err)
	v, found := int64(0), false
	r.ForEach(func(c cnc.Counter) bool {
		if c.TypeID == cnc.TypeSystem && strings.HasPrefix(c.Label, label) {
			v, found = c.Value, true
			return false
		}
		return true
	})
	require.True(t, found, "system counter %q", label)
	return v
}

// errorLog returns the driver's distinct error log as text and its entries.
func errorLog(t *testing.T, d *driver.Driver) (string, int) {
	f, err := cnc.Open(d.Dir())
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	n, err := inspect.Errors(&out, f, time.UTC)
	require.NoError(t, err)
	return out.String(), n
}

func requireCleanMedia(t *testing.T, m *ib.Media) {
	require.Zero(t, m.RecvErrors.Load(), "receive completions in error")
	require.Zero(t, m.SendErrors.Load(), "send completions in error")
	require.Zero(t, m.QPRestarts.Load(), "QP restarts")
	require.Zero(t, m.CQErrors.Load(), "failed CQs")
	require.Zero(t, m.CQRebuilds.Load(), "endpoints rebuilt after a CQ failure")
}

// The two-guest handshake: one guest tells the other over TCP when it is
// done (usually node 2 telling node 1).
func sendDone(t *testing.T, peer string, port int, what string) {
	var conn net.Conn
	var err error
	end := time.Now().Add(deadline)
	for {
		// 5 s: under netem loss a 1 s dial could give up with the
		// handshake complete on node 1's side, which then read EOF
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(peer, strconv.Itoa(port)), 5*time.Second)
		if err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "telling the other guest %s", what)
	defer conn.Close()
	_, err = conn.Write([]byte(what + "\n"))
	require.NoError(t, err)
}

func listenDone(t *testing.T, ip string, port int) net.Listener {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// awaitDone waits for the other guest's line. A connection that ends
// without one (a dial the other side gave up on while its handshake
// completed here) is skipped.
func awaitDone(ln net.Listener, limit time.Duration) (string, error) {
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(limit))
	for {
		conn, err := ln.Accept()
		if err != nil {
			return "", err
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err == nil || line != "" {
			return strings.TrimSpace(line), err
		}
	}
}

// netem puts loss on the root qdisc of dev for the test.
func netem(t *testing.T, dev string, spec ...string) {
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatalf("tc is not in the guest image: %v", err)
	}
	args := append([]string{"qdisc", "replace", "dev", dev, "root", "netem"}, spec...)
	out, err := exec.Command("tc", args...).CombinedOutput()
	require.NoError(t, err, "tc %s: %s", strings.Join(args, " "), out)
	t.Cleanup(func() {
		out, _ := exec.Command("tc", "-s", "qdisc", "show", "dev", dev).CombinedOutput()
		t.Logf("netem on %s at the end: %s", dev, out)
		_ = exec.Command("tc", "qdisc", "del", "dev", dev, "root").Run()
	})
}

func putSeq(msg []byte, i int) { binary.LittleEndian.PutUint64(msg, uint64(i)) }

type errUnexpected string

func (e errUnexpected) Error() string { return "node 2 said " + strconv.Quote(string(e)) }

// requireClean: the medium counted no failure and the driver's error log
// is empty.
func requireClean(t *testing.T, d *driver.Driver, m *ib.Media) {
	t.Helper()
	requireCleanMedia(t, m)
	log, k := errorLog(t, d)
	require.Zero(t, k, "error log: %s", log)
}

// requireLine waits for the other guest's line on ln and requires it to be
// want.
func requireLine(t *testing.T, ln net.Listener, want string) {
	t.Helper()
	line, err := awaitDone(ln, 2*deadline)
	require.NoError(t, err, "waiting for the other guest's %q", want)
	require.Equal(t, want, line)
}

// ibStream is a publication on one driver and a subscription on another,
// connected, with a receiver on a goroutine that checks every message
// from 0 once and in order until n arrived (done gets its verdict).
type ibStream struct {
	dp, ds *driver.Driver
	mp, ms *ib.Media
	pub    *client.Publication
	r      *receiver
	done   chan error
}

// startStream starts two drivers and a stream of n messages on ch (stream
// 1001), the receiver given limit to see them all.
func startStream(t *testing.T, ch string, n int, limit time.Duration) *ibStream {
	t.Helper()
	s := &ibStream{done: make(chan error, 1)}
	s.dp, s.mp = startIB(t, nil)
	s.ds, s.ms = startIB(t, nil)
	ctx := context.Background()
	sub, err := connectTo(t, s.ds).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	s.pub, err = connectTo(t, s.dp).AddPublication(ctx, ch, 1001)
	require.NoError(t, err)
	waitUntil(t, "connected", deadline, func() bool { return s.pub.IsConnected() && sub.IsConnected() })
	s.r = newReceiver(sub, 0)
	go func() { s.done <- s.r.until(n, limit) }()
	return s
}

// logEnd logs both drivers' error logs and, when the test failed, where
// the medium's and cm's goroutines wait (a t.Cleanup of stream tests).
func (s *ibStream) logEnd(t *testing.T, what string) {
	lp, _ := errorLog(t, s.dp)
	ls, _ := errorLog(t, s.ds)
	t.Logf("%s error logs: publisher:\n%s\nsubscriber:\n%s", what, lp, ls)
	if !t.Failed() {
		return
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "ibgo/cm.") || strings.Contains(g, "media/ib.") {
			t.Logf("goroutine:\n%s", g)
		}
	}
}
