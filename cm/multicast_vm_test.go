//go:build linux

package cm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// mckey's defaults (librdmacm/examples/mckey.c): 10 messages of 100 bytes.
const (
	mckeyCount = 10
	mckeySize  = 100
)

// TestMulticastJoinLeave: a full-member join gives the group's AH
// (::ffff:group, QPN 0xFFFFFF, Q_Key 0x01234567) and attaches the QP, which
// the kernel then refuses to destroy; Leave detaches it. A send-only join
// never attaches.
func TestMulticastJoinLeave(t *testing.T) {
	vm := testutil.VM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ep, err := cm.OpenUD(ctx, vm.IP, udOptions(2))
	require.NoError(t, err)
	defer ep.Close()
	m, err := ep.JoinMulticast(ctx, "239.1.2.3", nil)
	require.NoError(t, err)
	require.Equal(t, "::ffff:239.1.2.3", m.MGID.String())
	require.EqualValues(t, 0xFFFFFF, m.Peer.QPN)
	require.EqualValues(t, cm.UDPQKey, m.Peer.QKey)
	require.True(t, m.Peer.AHAttr.IsGlobal)
	require.Equal(t, m.MGID, m.Peer.AHAttr.GRH.DGID)
	require.NotNil(t, m.Peer.AH)
	require.True(t, m.Attached())

	err = ep.QP().Close()
	require.ErrorIs(t, err, uverbs.ErrBusy, "an attached QP cannot be destroyed")
	require.NoError(t, m.Leave())
	require.False(t, m.Attached())
	require.NoError(t, m.Leave(), "Leave is idempotent")
	require.Error(t, ep.QP().DetachMcast(m.MGID, 0), "Leave detached the QP already")

	so, err := cm.OpenUD(ctx, vm.IP, udOptions(2))
	require.NoError(t, err)
	defer so.Close()
	m2, err := so.JoinMulticast(ctx, "239.1.2.4", &cm.JoinOptions{SendOnly: true})
	if errors.Is(err, uverbs.ErrNotSupported) {
		t.Skipf("send-only join: %v", err)
	}
	require.NoError(t, err)
	require.False(t, m2.Attached())
	require.NotNil(t, m2.Peer.AH, "a send-only member still gets the group's AH")
	require.NoError(t, so.QP().Close(), "a send-only member's QP is not attached")
	require.NoError(t, m2.Leave())
}

// TestMulticastJoinAfterCancelledJoin (issue 30, item 5): a join whose
// context ends before the kernel answers leaves the group, and the next
// joins on the same endpoint succeed. Before, the abandoned wait armed a
// drop entry that LEAVE_MCAST (which drops the group's unread events)
// left unconsumed, so the next join's answer was swallowed and every
// later join on the id timed out.
func TestMulticastJoinAfterCancelledJoin(t *testing.T) {
	vm := testutil.VM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ep, err := cm.OpenUD(ctx, vm.IP, udOptions(2))
	require.NoError(t, err)
	defer ep.Close()
	for i := range 20 {
		gone, stop := context.WithCancel(ctx)
		stop() // ended before any answer can come
		_, err := ep.JoinMulticast(gone, fmt.Sprintf("239.1.9.%d", 2*i+1), nil)
		require.Error(t, err, "round %d: the cancelled join", i)
		jctx, jcancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := ep.JoinMulticast(jctx, fmt.Sprintf("239.1.9.%d", 2*i+2), nil)
		jcancel()
		require.NoError(t, err, "round %d: the join after a cancelled one", i)
		require.NoError(t, m.Leave())
	}
}

// TestMulticastIPv6Group: RoCE v2 has no IPv6 multicast in the kernel's CM
// (cma.c: cma_iboe_join_multicast answers ENOTSUPP, errno 524), which we
// report as ErrNotSupported.
func TestMulticastIPv6Group(t *testing.T) {
	vm := testutil.VM(t)
	ll := linkLocal(t, vm)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := cm.OpenUD(ctx, netip.AddrPortFrom(ll, 0).String(), udOptions(1))
	require.NoError(t, err)
	defer ep.Close()
	_, err = ep.JoinMulticast(ctx, "ff0e::1234", nil)
	require.Error(t, err)
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.Equal(t, 524, int(sys.ErrnoOf(err)), "%v", err)
	t.Logf("IPv6 group: %v", err)
}

// TestMulticastLoopback: in one guest, a full member receives what a
// send-only member of the same group sends (rxe loops multicast back to
// attached QPs of the same device).
func TestMulticastLoopback(t *testing.T) {
	vm := testutil.OneNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n, size = 8, 256
	rx, err := cm.OpenUD(ctx, vm.IP, udOptions(n))
	require.NoError(t, err)
	defer rx.Close()
	rr := rigFor(t, rx, n, size)
	rr.postRecvs()
	mr, err := rx.JoinMulticast(ctx, "239.1.2.5", nil)
	require.NoError(t, err)
	defer mr.Leave()

	tx, err := cm.OpenUD(ctx, vm.IP, udOptions(n))
	require.NoError(t, err)
	defer tx.Close()
	tr := rigFor(t, tx, n, size)
	mt, err := tx.JoinMulticast(ctx, "239.1.2.5", &cm.JoinOptions{SendOnly: true})
	require.NoError(t, err)
	defer mt.Leave()
	for i := 0; i < n; i++ {
		qpn := tx.QP().QPN()
		tr.send(mt.Peer.AH, mt.Peer.QPN, mt.Peer.QKey, pattern(i, size), &qpn, true, i)
		require.NoError(t, tr.poll(ctx, 0, 1, nil))
	}
	got := map[int]bool{}
	require.NoError(t, rr.poll(ctx, n, 0, func(wc uverbs.WC, buf []byte) {
		require.Equal(t, tx.QP().QPN(), wc.SrcQP)
		g, err := uverbs.ParseGRH(buf)
		require.NoError(t, err)
		require.Equal(t, mr.MGID, g.DGID, "sent to the group")
		for i := 0; i < n; i++ {
			if string(buf[uverbs.GRHLen:]) == string(pattern(i, size)) {
				got[i] = true
			}
		}
	}))
	require.Len(t, got, n, "every datagram arrived intact")
}

// TestMckeyInterop: ibgo receives what Debian's mckey sends, and mckey
// receives what ibgo sends. In the two-guest topology the C program runs on
// the other guest (node 2 sends to node 1 first, then node 1's mckey
// receives from node 2); in one guest both run here.
func TestMckeyInterop(t *testing.T) {
	vm := testutil.VM(t)
	two := vm.Topo == "two"
	t.Run("c-sender", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		const group = "239.1.1.10"
		// 6.12's rxe sends from a work queue and mckey destroys its QP right
		// after posting: a burst of 10 lost everything in one run of many.
		// A longer burst leaves the queue time to send some of it.
		n := mckeyCount
		if kernelAtLeast(6, 12) {
			n = 100
		}
		if two && vm.Node == 2 {
			waitTCP(t, ctx, vm.Peer, 18711)
			c := startC(t, ctx, "mckey", "-m", group, "-b", vm.IP, "-s", "-C", strconv.Itoa(n), "-S", strconv.Itoa(mckeySize))
			out, err := c.wait(ctx)
			require.NoError(t, err, out)
			require.Contains(t, out, "mckey: joined dgid: ::ffff:"+group)
			return
		}
		ep, err := cm.OpenUD(ctx, vm.IP, udOptions(n))
		require.NoError(t, err)
		defer ep.Close()
		r := rigFor(t, ep, n, mckeySize)
		r.postRecvs()
		m, err := ep.JoinMulticast(ctx, group, nil)
		require.NoError(t, err)
		defer m.Leave()
		src := "::ffff:" + serverPeerIP(vm)
		got := 0
		// On 6.12 in one guest a burst can lose every datagram (measured
		// once in a clean-clone CI run: 0/100); mckey then sends again, up
		// to three bursts, and at least one datagram must arrive.
		bursts := 1
		if kernelAtLeast(6, 12) && !two {
			bursts = 3
		}
		for b := 1; ; b++ {
			var c *cproc
			if two {
				signalTCP(t, ctx, vm.IP, 18711)
			} else {
				c = startC(t, ctx, "mckey", "-m", group, "-b", vm.IP, "-s", "-C", strconv.Itoa(n), "-S", strconv.Itoa(mckeySize))
			}
			// mckey's sender posts its sends unsignaled and at once destroys
			// its AH and QP and exits. The receive deadline is 15 s after
			// its start (its sends come 3 s after the join).
			pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
			err = r.poll(pctx, n, 0, func(wc uverbs.WC, buf []byte) {
				require.EqualValues(t, mckeySize+uverbs.GRHLen, wc.ByteLen)
				require.NotZero(t, wc.Flags&uverbs.WCWithImm)
				require.Equal(t, wc.SrcQP, wc.Imm, "mckey puts its QPN in the immediate")
				g, err := uverbs.ParseGRH(buf)
				require.NoError(t, err)
				require.Equal(t, m.MGID, g.DGID)
				require.Equal(t, src, g.SGID.String())
				got++
			})
			pcancel()
			if c != nil {
				out, err := c.wait(ctx)
				require.NoError(t, err, out)
			}
			if err == nil || got > 0 || b == bursts {
				break
			}
			t.Logf("6.12: none of mckey's burst %d of %d datagrams arrived before it tore down its QP (%v); it sends again", b, n, err)
		}
		if err != nil && got > 0 && kernelAtLeast(6, 12) {
			// Measured on 6.12, in one guest (1/10 and 6/10 arrived; with C
			// receivers too, 2 runs of 3 lost data) and across two guests
			// (1/10): rxe there sends from a work queue, and what mckey had
			// not sent when it destroyed its AH and QP right after posting is
			// lost. Our sender waits for its completions (c-receiver gets
			// all 10 on 6.12).
			t.Logf("6.12: %d/%d datagrams of mckey's unsignaled burst arrived before it tore down its QP (%v)", got, n, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, n, got)
	})
	t.Run("c-receiver", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const group = "239.1.1.11"
		var c *cproc
		if !two || vm.Node == 1 {
			c = startC(t, ctx, "mckey", "-m", group, "-b", vm.IP, "-C", strconv.Itoa(mckeyCount), "-S", strconv.Itoa(mckeySize))
			// mckey's stdout is a pipe, so its "joined" line comes only at
			// exit: watch the IGMP membership its full-member join adds.
			waitIGMP(t, ctx, vm.Netdev, group)
			if two {
				signalTCP(t, ctx, vm.IP, 18712)
				out, err := c.wait(ctx)
				require.NoError(t, err, out)
				require.Contains(t, out, "data transfers complete")
				require.Contains(t, out, "return status 0")
				return
			}
		} else {
			waitTCP(t, ctx, vm.Peer, 18712)
		}
		ep, err := cm.OpenUD(ctx, vm.IP, udOptions(mckeyCount))
		require.NoError(t, err)
		defer ep.Close()
		r := rigFor(t, ep, mckeyCount, mckeySize)
		m, err := ep.JoinMulticast(ctx, group, &cm.JoinOptions{SendOnly: true})
		require.NoError(t, err)
		defer m.Leave()
		qpn := ep.QP().QPN()
		for i := 0; i < mckeyCount; i++ {
			wr := uverbs.SendWR{}
			m.Peer.Dest(&wr)
			r.send(wr.AH, wr.RemoteQPN, wr.RemoteQKey, pattern(i, mckeySize), &qpn, true, i)
			require.NoError(t, r.poll(ctx, 0, 1, nil))
		}
		if c != nil {
			out, err := c.wait(ctx)
			require.NoError(t, err, out)
			require.Contains(t, out, "data transfers complete")
			require.Contains(t, out, "return status 0")
		}
	})
}

// waitIGMP waits until netdev is a member of IPv4 group (/proc/net/igmp),
// which the kernel's CM adds for a full-member join, then a little longer
// for the joiner's ATTACH_MCAST. Without the entry after 5 s it goes on
// after a fixed wait (and says so).
func waitIGMP(t *testing.T, ctx context.Context, netdev, group string) {
	g := netip.MustParseAddr(group).As4()
	hex := fmt.Sprintf("%08X", binary.LittleEndian.Uint32(g[:]))
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, err := os.ReadFile("/proc/net/igmp"); err == nil && igmpHas(string(b), netdev, hex) {
			time.Sleep(300 * time.Millisecond)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("no IGMP membership of %s on %s after 5 s; going on", group, netdev)
}

// igmpHas reports whether /proc/net/igmp lists group (hex as the kernel
// prints it) under netdev.
func igmpHas(table, netdev, hex string) bool {
	in := false
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, " ") {
			in = len(f) > 1 && f[1] == netdev
			continue
		}
		if in && f[0] == hex {
			return true
		}
	}
	return false
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(major, minor int) bool {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(string(b), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// linkLocal is the netdev's IPv6 link-local address with its zone (the
// test skips without one).
func linkLocal(t *testing.T, vm testutil.VMInfo) netip.Addr {
	ifi, err := net.InterfaceByName(vm.Netdev)
	require.NoError(t, err)
	addrs, err := ifi.Addrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			return p.Addr().WithZone(vm.Netdev)
		}
	}
	t.Skipf("%s has no IPv6 link-local address", vm.Netdev)
	return netip.Addr{}
}

// TestMulticastTeardownAfterBurst: mckey's sender pattern (10 unsignaled
// sends, then at once leave and destroy the AH and QP) against waiting for
// the last send's completion first. Waiting delivers all 10 on every kernel
// (asserted); without it 6.1 delivered 10/10 and 6.12 1/10 (rxe sends from
// a work queue there), which is why TestMckeyInterop/c-sender tolerates
// losses on 6.12. The no-wait count is logged.
func TestMulticastTeardownAfterBurst(t *testing.T) {
	vm := testutil.OneNode(t)
	for _, wait := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rx, err := cm.OpenUD(ctx, vm.IP, udOptions(10))
		require.NoError(t, err)
		rr := rigFor(t, rx, 10, 100)
		rr.postRecvs()
		mr, err := rx.JoinMulticast(ctx, "239.1.3.1", nil)
		require.NoError(t, err)
		tx, err := cm.OpenUD(ctx, vm.IP, udOptions(10))
		require.NoError(t, err)
		tr := rigFor(t, tx, 10, 100)
		mt, err := tx.JoinMulticast(ctx, "239.1.3.1", &cm.JoinOptions{SendOnly: true})
		require.NoError(t, err)
		for i := 0; i < 10; i++ {
			tr.send(mt.Peer.AH, mt.Peer.QPN, mt.Peer.QKey, pattern(i, 100), nil, wait && i == 9, i)
		}
		if wait {
			require.NoError(t, tr.poll(ctx, 0, 1, nil))
		}
		mt.Leave()
		tx.Close()
		got := 0
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		rr.poll(pctx, 10, 0, func(uverbs.WC, []byte) { got++ })
		pcancel()
		t.Logf("wait for the last completion before teardown: %v: %d/10 arrived", wait, got)
		if wait {
			require.Equal(t, 10, got)
		}
		mr.Leave()
		rx.Close()
		cancel()
	}
}
