//go:build linux

package uverbs_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// restoreRXE adds the rxe link back after a test deleted it and waits until
// it is usable again (port active, the guest's GID in place), so that the
// tests after it and the leak check find the device they started with.
func restoreRXE(t *testing.T, dev, netdev, ip string) {
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", dev)); err == nil {
		return
	}
	out, err := exec.Command("rdma", "link", "add", dev, "type", "rxe", "netdev", netdev).CombinedOutput()
	require.NoError(t, err, "rdma link add: %s", out)
	var gid uverbs.GID
	copy(gid[:], net.ParseIP(ip).To16())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := uverbs.Open(dev); err == nil {
			pa, perr := c.QueryPort(1)
			_, gerr := c.GIDIndexForIP(1, gid)
			c.Close()
			if perr == nil && pa.State == uverbs.PortActive && gerr == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come back within 30s", dev)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Deleting the rxe link under a running program: rxe has no
// disassociate_ucontext, so the kernel removes the uverbs device and waits
// for the program to close its files. ibgo reports EventDeviceFatal, fails
// every later command and post with ErrDeviceFatal (no call hangs), closes
// cleanly, and the deletion then completes (nothing left behind).
func TestDeviceFatalOnLinkDelete(t *testing.T) {
	// It deletes and re-adds the guest's rxe link: not while a peer guest
	// talks to it.
	testutil.OneNode(t)
	b := newBed(t)
	c := b.ctx
	// delDone is closed once rdma link delete returned, with its error in
	// delErr.
	delDone := make(chan struct{})
	var delErr error
	var deleting bool
	t.Cleanup(func() {
		// Also after a failure half way: close what holds the deletion up,
		// let it finish, and bring the device back.
		c.Close()
		if deleting {
			select {
			case <-delDone:
			case <-time.After(30 * time.Second):
			}
		}
		restoreRXE(t, b.vm.Dev, b.vm.Netdev, b.vm.IP)
	})
	ch, err := c.CreateCompChannel()
	require.NoError(t, err)
	acq, err := c.CreateCQ(uverbs.CQInitAttr{CQE: 16, Channel: ch})
	require.NoError(t, err)
	zcq, err := c.CreateCQ(uverbs.CQInitAttr{CQE: 16})
	require.NoError(t, err)
	a, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: acq, RecvCQ: acq, Cap: defaultCap})
	require.NoError(t, err)
	z, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: zcq, RecvCQ: zcq, Cap: defaultCap})
	require.NoError(t, err)
	require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, b.params()))
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, b.params()))
	m, err := uverbs.AllocMemory(8192, uverbs.MemoryOptions{})
	require.NoError(t, err)
	defer m.Close()
	mr, err := b.pd.RegMR(m.Bytes(), allAccess)
	require.NoError(t, err)
	mw, err := b.pd.AllocMW(uverbs.MWType1)
	require.NoError(t, err)
	// The device works.
	fill(m.Bytes()[:64], 1)
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{mr.SGE(0, 64)}, RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey()}})
	require.NoError(t, err)
	requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCRDMAWrite, 1)

	// Waiters on the async and completion events.
	type evRes struct {
		ev  uverbs.AsyncEvent
		err error
	}
	evc := make(chan evRes, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ev, err := c.GetAsyncEvent(ctx)
		for err == nil && ev.Type != uverbs.EventDeviceFatal {
			ev, err = c.GetAsyncEvent(ctx) // port events may come first
		}
		evc <- evRes{ev, err}
	}()
	require.NoError(t, acq.ReqNotify(false))
	compc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := ch.GetEvent(ctx)
		compc <- err
	}()

	var out bytes.Buffer
	del := exec.Command("rdma", "link", "delete", b.vm.Dev)
	del.Stdout, del.Stderr = &out, &out
	require.NoError(t, del.Start())
	deleting = true
	go func() { delErr = del.Wait(); close(delDone) }()

	start := time.Now()
	select {
	case r := <-evc:
		require.NoError(t, r.err)
		require.Equal(t, uverbs.EventDeviceFatal, r.ev.Type)
		t.Logf("EventDeviceFatal %v after the deletion started", time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("no EventDeviceFatal within 30s of rdma link delete")
	}
	require.True(t, c.Fatal())
	select {
	case err := <-compc:
		require.ErrorIs(t, err, uverbs.ErrDeviceFatal, "a completion-event wait ends with the device")
	case <-time.After(10 * time.Second):
		t.Fatal("CompChannel.GetEvent still waiting after the device went away")
	}

	// Every operation now fails at once with the typed error.
	fatal := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, uverbs.ErrDeviceFatal, what)
		require.ErrorIs(t, err, unix.EIO, what)
		var ue *uverbs.Error
		require.True(t, errors.As(err, &ue), what)
	}
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{mr.SGE(0, 8)}}})
	fatal("post send", err)
	_, err = z.PostRecv([]uverbs.RecvWR{{WRID: 3, SGL: []uverbs.SGE{mr.SGE(0, 8)}}})
	fatal("post recv", err)
	_, err = c.AllocPD()
	fatal("alloc pd", err)
	_, err = c.QueryPort(1)
	fatal("query port", err)
	_, err = c.QueryDevice()
	fatal("query device", err)
	_, err = b.pd.RegMR(m.Bytes(), allAccess)
	fatal("reg mr", err)
	fatal("req notify", acq.ReqNotify(false))
	_, _, err = a.Query(uverbs.QPAttrState)
	fatal("query qp", err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = c.GetAsyncEvent(ctx)
	cancel()
	fatal("a second get async event", err)
	// Completions already there can still be polled.
	_, err = acq.Poll(make([]uverbs.WC, 4))
	require.NoError(t, err)

	// The kernel is still waiting for this program.
	select {
	case <-delDone:
		t.Fatalf("rdma link delete returned before the context was closed: %v: %s", delErr, out.String())
	default:
	}
	for _, cl := range []interface{ Close() error }{mw, a, z, acq, zcq, ch, mr, b.pd} {
		require.NoError(t, cl.Close())
	}
	require.NoError(t, c.Close())
	select {
	case <-delDone:
		require.NoError(t, delErr, "rdma link delete: %s", out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("rdma link delete still blocked 30s after the context closed: something of it is still open")
	}
	_, err = os.Stat(filepath.Join("/sys/class/infiniband", b.vm.Dev))
	require.True(t, os.IsNotExist(err), "%s is gone", b.vm.Dev)
}
