//go:build linux

package uverbs_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// bed is one context on the VM's device with a PD, a GID index for the
// guest's IP and a registered buffer, closed at the end of the test.
type bed struct {
	t    testing.TB
	vm   testutil.VMInfo
	ctx  *uverbs.Context
	pd   *uverbs.PD
	gidx uint8
	gid  uverbs.GID
	mtu  uverbs.MTU
}

func newBed(t testing.TB) *bed {
	t.Helper()
	vm := testutil.VM(t)
	c, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	pd, err := c.AllocPD()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pd.Close()) })
	var gid uverbs.GID
	copy(gid[:], net.ParseIP(vm.IP).To16())
	gidx, err := c.GIDIndexForIP(1, gid)
	require.NoError(t, err)
	pa, err := c.QueryPort(1)
	require.NoError(t, err)
	return &bed{t: t, vm: vm, ctx: c, pd: pd, gidx: gidx, gid: gid, mtu: pa.ActiveMTU}
}

// mem maps n bytes and registers them with access.
func (b *bed) mem(n int, access uverbs.Access) (*uverbs.Memory, *uverbs.MR) {
	b.t.Helper()
	m, err := uverbs.AllocMemory(n, uverbs.MemoryOptions{})
	require.NoError(b.t, err)
	mr, err := b.pd.RegMR(m.Bytes(), access)
	require.NoError(b.t, err)
	b.t.Cleanup(func() {
		require.NoError(b.t, mr.Close())
		require.NoError(b.t, m.Close())
	})
	return m, mr
}

func (b *bed) cq(n int, ch *uverbs.CompChannel) *uverbs.CQ {
	b.t.Helper()
	cq, err := b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: n, Channel: ch})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { require.NoError(b.t, cq.Close()) })
	return cq
}

func (b *bed) qp(typ uverbs.QPType, scq, rcq *uverbs.CQ, cp uverbs.QPCap, srq *uverbs.SRQ) *uverbs.QP {
	b.t.Helper()
	qp, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: scq, RecvCQ: rcq, Cap: cp, SRQ: srq})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { require.NoError(b.t, qp.Close()) })
	return qp
}

func (b *bed) params() uverbs.ConnectParams {
	return uverbs.ConnectParams{SGIDIndex: b.gidx, MTU: b.mtu}
}

// pair is two connected QPs of one type on the loopback device, each with its
// own CQ.
type pair struct {
	b        *bed
	a, z     *uverbs.QP
	acq, zcq *uverbs.CQ
}

var defaultCap = uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}

func (b *bed) pair(typ uverbs.QPType, cp uverbs.QPCap) *pair {
	b.t.Helper()
	p := &pair{b: b, acq: b.cq(256, nil), zcq: b.cq(256, nil)}
	p.a = b.qp(typ, p.acq, p.acq, cp, nil)
	p.z = b.qp(typ, p.zcq, p.zcq, cp, nil)
	require.NoError(b.t, p.a.Connect(uverbs.Endpoint{QPN: p.z.QPN(), PSN: 200, GID: b.gid}, 100, b.params()))
	require.NoError(b.t, p.z.Connect(uverbs.Endpoint{QPN: p.a.QPN(), PSN: 100, GID: b.gid}, 200, b.params()))
	return p
}

// wait polls cq until n completions arrived or the test's patience runs out.
func wait(t testing.TB, cq *uverbs.CQ, n int) []uverbs.WC {
	t.Helper()
	out := make([]uverbs.WC, 0, n)
	buf := make([]uverbs.WC, 16)
	deadline := time.Now().Add(20 * time.Second)
	for spins := 0; len(out) < n; spins++ {
		k, err := cq.Poll(buf)
		require.NoError(t, err)
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("waited 20s for %d completions, got %d: %+v", n, len(out), out)
			}
			if spins > 1000 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	return out
}
