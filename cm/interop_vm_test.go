//go:build linux

package cm

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

func cTool(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		if testutil.Required() {
			t.Fatalf("REQUIRE_VM=1 but %s (rdmacm-utils) is not installed", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// dialRetry dials until the C server listens (REJECTED 8 while it starts).
func dialRetry(t *testing.T, ctx context.Context, d *Dialer, a Addr) *Conn {
	t.Helper()
	for {
		c, err := d.Dial(ctx, a)
		if err == nil {
			return c
		}
		if ctx.Err() != nil {
			t.Fatalf("dial %v: %v", a, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// connBufs registers n slots of size bytes on a connection's PD.
type connBufs struct {
	b    *buffers
	size int
}

func newConnBufs(t *testing.T, c *Conn, n, size int) *connBufs {
	return &connBufs{b: newBuffers(t, c.PD(), n*size), size: size}
}

func (cb *connBufs) postRecvs(c *Conn, n int) error {
	for i := 0; i < n; i++ {
		if _, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{cb.b.mr.SGE(i*cb.size, cb.size)}}}); err != nil {
			return err
		}
	}
	return nil
}

func (cb *connBufs) send(t *testing.T, c *Conn, n int) {
	for i := 0; i < n; i++ {
		_, err := c.QP().PostSend([]uverbs.SendWR{{WRID: 100 + uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{cb.b.mr.SGE(0, cb.size)}}})
		require.NoError(t, err)
	}
}

// waitN waits for n successful completions on cq.
func waitN(t *testing.T, cq *uverbs.CQ, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		pollOne(t, cq)
	}
}

// ucmatose (cmatose.c) as the server with ibgo clients: 3 connections at
// once, 10 messages of 100 bytes each way, the server disconnects.
func TestUcmatoseGoClients(t *testing.T) {
	vm, addr := vmAddr(t, 7471)
	testutil.OneNode(t)
	tool := cTool(t, "ucmatose")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const conns, count, size = 3, 10, 100
	srv := exec.CommandContext(ctx, tool, "-b", vm.IP, "-c", strconv.Itoa(conns), "-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	require.NoError(t, srv.Start())
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cb *connBufs
			d := Dialer{Cap: uverbs.QPCap{MaxSendWR: count, MaxRecvWR: count, MaxSendSGE: 1, MaxRecvSGE: 1},
				BeforeConnect: func(c *Conn) error {
					cb = newConnBufs(t, c, count, size)
					return cb.postRecvs(c, count)
				}}
			c := dialRetry(t, ctx, &d, addr)
			defer cb.b.close()
			defer c.Close()
			waitN(t, c.RecvCQ(), count) // the server's messages
			cb.send(t, c, count)        // our replies
			waitN(t, c.SendCQ(), count)
			require.NoError(t, c.WaitDisconnect(ctx), "the server disconnects")
		}()
	}
	wg.Wait()
	require.NoError(t, srv.Wait(), "%s", out.String())
	require.Contains(t, out.String(), "return status 0")
}

// ucmatose as the client, ibgo's Listener as the server: 3 connections.
func TestUcmatoseGoServer(t *testing.T) {
	vm, addr := vmAddr(t, 7472)
	testutil.OneNode(t)
	tool := cTool(t, "ucmatose")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const conns, count, size = 3, 10, 100
	var mu sync.Mutex
	bufs := map[*Conn]*connBufs{}
	lc := ListenConfig{Cap: uverbs.QPCap{MaxSendWR: count, MaxRecvWR: count, MaxSendSGE: 1, MaxRecvSGE: 1},
		// The C client connects with rnr_retry 0: receives must be posted.
		BeforeAccept: func(c *Conn) error {
			cb := newConnBufs(t, c, count, size)
			mu.Lock()
			bufs[c] = cb
			mu.Unlock()
			return cb.postRecvs(c, count)
		}}
	l, err := lc.Listen(addr)
	require.NoError(t, err)
	defer l.Close()
	cli := exec.CommandContext(ctx, tool, "-s", vm.IP, "-p", "7472", "-c", strconv.Itoa(conns), "-C", strconv.Itoa(count), "-S", strconv.Itoa(size))
	var out bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &out
	require.NoError(t, cli.Start())
	var cs []*Conn
	for i := 0; i < conns; i++ {
		c, err := l.Accept(ctx)
		require.NoError(t, err, "%s", out.String())
		cs = append(cs, c)
	}
	for _, c := range cs { // cmatose's server: send, complete, receive, disconnect
		bufs[c].send(t, c, count)
		waitN(t, c.SendCQ(), count)
	}
	for _, c := range cs {
		waitN(t, c.RecvCQ(), count)
		require.NoError(t, c.Disconnect())
	}
	for _, c := range cs {
		require.NoError(t, c.WaitDisconnect(ctx))
		require.NoError(t, c.Close())
		bufs[c].b.close()
	}
	require.NoError(t, cli.Wait(), "%s", out.String())
	require.Contains(t, out.String(), "return status 0")
}

// rdma_server (the synchronous librdmacm API, which MIGRATE_IDs each child)
// with an ibgo client: a 16-byte SEND each way.
func TestRdmaServerGoClient(t *testing.T) {
	vm, addr := vmAddr(t, 7473)
	testutil.OneNode(t)
	tool := cTool(t, "rdma_server")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, tool, "-s", vm.IP, "-p", "7473")
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	require.NoError(t, srv.Start())
	// One run in the VM under a loaded host saw our SEND complete and no
	// reply in 20 s; say where rdma_server was when that happens.
	t.Cleanup(func() {
		if t.Failed() {
			_ = srv.Process.Kill()
			_ = srv.Wait()
			t.Logf("rdma_server output:\n%s", out.String())
		}
	})
	var cb *connBufs
	d := Dialer{BeforeConnect: func(c *Conn) error {
		cb = newConnBufs(t, c, 2, 16)
		return cb.postRecvs(c, 1)
	}}
	c := dialRetry(t, ctx, &d, addr)
	defer cb.b.close()
	copy(cb.b.mem.Bytes(), "0123456789abcdef")
	cb.send(t, c, 1)
	waitN(t, c.SendCQ(), 1)
	waitN(t, c.RecvCQ(), 1)
	require.NoError(t, c.Close())
	require.NoError(t, srv.Wait(), "%s", out.String())
	require.Contains(t, out.String(), "rdma_server: end 0")
}

// rdma_client against ibgo's Listener (it connects with R = I = the device
// maximum, which Accept clamps).
func TestRdmaClientGoServer(t *testing.T) {
	vm, addr := vmAddr(t, 7474)
	testutil.OneNode(t)
	tool := cTool(t, "rdma_client")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cb *connBufs
	lc := ListenConfig{BeforeAccept: func(c *Conn) error {
		cb = newConnBufs(t, c, 2, 16)
		return cb.postRecvs(c, 1)
	}}
	l, err := lc.Listen(addr)
	require.NoError(t, err)
	defer l.Close()
	cli := exec.CommandContext(ctx, tool, "-s", vm.IP, "-p", "7474")
	var out bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &out
	require.NoError(t, cli.Start())
	c, err := l.Accept(ctx)
	require.NoError(t, err, "%s", out.String())
	defer cb.b.close()
	require.EqualValues(t, 128, c.Remote().ResponderResources, "rdma_client asks for the device maximum")
	waitN(t, c.RecvCQ(), 1)
	cb.send(t, c, 1)
	waitN(t, c.SendCQ(), 1)
	require.NoError(t, c.WaitDisconnect(ctx))
	require.NoError(t, c.Close())
	require.NoError(t, cli.Wait(), "%s", out.String())
	require.Contains(t, out.String(), "rdma_client: end 0")
	_ = fmt.Sprint()
}

// A peer process killed while connected: its kernel destroys its id, which
// sends a DREQ; the idle ibgo side gets DISCONNECTED and releases
// everything (TestMain's leak check counts cm_ids and QPs).
func TestPeerKilledDisconnects(t *testing.T) {
	vm, addr := vmAddr(t, 7475)
	testutil.OneNode(t)
	tool := cTool(t, "rping")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cb *connBufs
	lc := ListenConfig{BeforeAccept: func(c *Conn) error {
		cb = newConnBufs(t, c, 2, 16)
		return cb.postRecvs(c, 2)
	}}
	l, err := lc.Listen(addr)
	require.NoError(t, err)
	defer l.Close()
	cli := exec.CommandContext(ctx, tool, "-c", "-a", vm.IP, "-p", "7475")
	require.NoError(t, cli.Start())
	c, err := l.Accept(ctx)
	require.NoError(t, err)
	defer cb.b.close()
	waitN(t, c.RecvCQ(), 1) // its first message: the connection works
	require.NoError(t, cli.Process.Kill())
	cli.Wait()
	start := time.Now()
	require.NoError(t, c.WaitDisconnect(ctx))
	t.Logf("DISCONNECTED %v after the kill", time.Since(start))
	require.Equal(t, uverbs.QPStateErr, c.QP().State())
	require.NoError(t, c.Close())
}
