//go:build linux

package uverbs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/rxe"
	"github.com/ibgo/ibgo/uverbs"
)

const allAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

func requireWC(t *testing.T, wc uverbs.WC, status uverbs.WCStatus, op uverbs.WCOpcode, wrid uint64) {
	t.Helper()
	require.Equal(t, status, wc.Status, "wr %d: %s", wc.WRID, wc.Status)
	if status == uverbs.WCSuccess {
		require.Equal(t, op, wc.Opcode, "wr %d", wc.WRID)
	}
	require.EqualValues(t, wrid, wc.WRID)
}

// RDMA write with immediate consumes a receive; gather and scatter over up to
// the QP's SGE limit are byte-exact.
func TestRCWriteWithImmAndSGEs(t *testing.T) {
	b := newBed(t)
	cp := defaultCap
	cp.MaxSendSGE, cp.MaxRecvSGE = 8, 8
	p := b.pair(uverbs.QPTypeRC, cp)
	maxSGE := int(p.a.Cap().MaxSendSGE)
	if r := int(p.z.Cap().MaxRecvSGE); r < maxSGE {
		maxSGE = r
	}
	am, amr := b.mem(1<<16, allAccess)
	zm, zmr := b.mem(1<<16, allAccess)
	src, dst := am.Bytes(), zm.Bytes()
	for nsge := 1; nsge <= maxSGE; nsge++ {
		fill(src, byte(nsge))
		clear(dst)
		// Gather nsge pieces of varying length from scattered offsets...
		var sgl, rgl []uverbs.SGE
		total := 0
		for i := 0; i < nsge; i++ {
			l := 100 + 37*i
			sgl = append(sgl, amr.SGE(i*2048, l))
			total += l
		}
		// ...and scatter them into nsge receive pieces of another shape.
		per := (total + nsge - 1) / nsge
		for i := 0; i < nsge; i++ {
			rgl = append(rgl, zmr.SGE(8192+i*4096, per))
		}
		_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: uint64(nsge), SGL: rgl}})
		require.NoError(t, err)
		_, err = p.a.PostSend([]uverbs.SendWR{{WRID: uint64(100 + nsge), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: sgl}})
		require.NoError(t, err)
		requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, uint64(100+nsge))
		rc := wait(t, p.zcq, 1)[0]
		requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, uint64(nsge))
		require.EqualValues(t, total, rc.ByteLen)
		var want, got []byte
		for _, s := range sgl {
			want = append(want, src[s.Addr-amr.Addr():s.Addr-amr.Addr()+uint64(s.Length)]...)
		}
		left := total
		for _, r := range rgl {
			n := min(left, int(r.Length))
			got = append(got, dst[r.Addr-zmr.Addr():r.Addr-zmr.Addr()+uint64(n)]...)
			left -= n
		}
		require.True(t, bytes.Equal(want, got), "%d SGEs: payload differs", nsge)
	}
	// One SGE more than the QP takes is refused before anything is posted.
	sgl := make([]uverbs.SGE, int(p.a.Cap().MaxSendSGE)+1)
	for i := range sgl {
		sgl[i] = amr.SGE(i*8, 8)
	}
	n, err := p.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: sgl}})
	require.Zero(t, n)
	require.ErrorIs(t, err, unix.EINVAL)

	// RDMA write with immediate: data lands remotely, a receive completes
	// with the immediate and no data of its own.
	fill(src[:3000], 77)
	_, err = p.z.PostRecv([]uverbs.RecvWR{{WRID: 500}})
	require.NoError(t, err)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 501, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: 0x01020304,
		SGL: []uverbs.SGE{amr.SGE(0, 3000)}, RemoteAddr: zmr.Addr() + 100, RKey: zmr.RKey()}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCRDMAWrite, 501)
	rc := wait(t, p.zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecvRDMAWithImm, 500)
	require.EqualValues(t, 0x01020304, rc.Imm)
	require.NotZero(t, rc.Flags&uverbs.WCWithImm)
	require.EqualValues(t, 3000, rc.ByteLen)
	require.True(t, bytes.Equal(src[:3000], dst[100:3100]))
}

// Inline data is copied at post time: changing the buffer before the send
// completes does not change what arrives.
func TestInlineSend(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(4096, allAccess)
	zm, zmr := b.mem(4096, allAccess)
	src := am.Bytes()
	fill(src[:64], 5)
	want := append([]byte(nil), src[:64]...)
	_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{zmr.SGE(0, 4096)}}})
	require.NoError(t, err)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{amr.SGE(0, 32), amr.SGE(32, 32)}}})
	require.NoError(t, err)
	clear(src[:64])
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 2)
	rc := wait(t, p.zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 1)
	require.EqualValues(t, 64, rc.ByteLen)
	require.Equal(t, want, zm.Bytes()[:64])
	// More inline data than the QP takes.
	big := int(p.a.Cap().MaxInlineData) + 1
	_, err = p.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{amr.SGE(0, big)}}})
	require.ErrorIs(t, err, unix.EINVAL)
}

// A fenced send after a read, and unsignaled work requests: only signaled
// ones complete.
func TestFenceAndSelectiveSignaling(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	_, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(16384, allAccess)
	fill(zm.Bytes()[:4096], 31)
	_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: []uverbs.SGE{zmr.SGE(4096, 4096)}}})
	require.NoError(t, err)
	n, err := p.a.PostSend([]uverbs.SendWR{
		{WRID: 1, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{amr.SGE(0, 4096)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey()},
		{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendFence, SGL: []uverbs.SGE{amr.SGE(0, 4096)}},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// A signaled marker behind both: an RC send queue completes in order, so
	// a completion of the unsignaled read would come before the marker's.
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendFence,
		SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: zmr.Addr() + 8192, RKey: zmr.RKey()}})
	require.NoError(t, err)
	wcs := waitFor(t, p.acq, 3)
	require.Len(t, wcs, 2, "only the signaled send and the marker complete: %+v", wcs)
	requireWC(t, wcs[0], uverbs.WCSuccess, uverbs.WCSend, 2)
	requireWC(t, wcs[1], uverbs.WCSuccess, uverbs.WCRDMAWrite, 3)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 9)
	// The fence made the send carry what the read fetched.
	require.Equal(t, zm.Bytes()[:4096], zm.Bytes()[4096:8192])
}

// waitFor polls cq until the completion of work request marker arrives and
// returns every completion up to and including it; one that arrives in the
// same poll after the marker fails the test.
func waitFor(t testing.TB, cq *uverbs.CQ, marker uint64) []uverbs.WC {
	t.Helper()
	var out []uverbs.WC
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]uverbs.WC, 16)
	for {
		k, err := cq.Poll(buf)
		require.NoError(t, err)
		for i, wc := range buf[:k] {
			out = append(out, wc)
			if wc.WRID == marker {
				require.Equal(t, k-1, i, "completions after the marker: %+v", buf[i+1:k])
				return out
			}
		}
		if k == 0 {
			require.True(t, time.Now().Before(deadline), "no completion for marker %d; got %+v", marker, out)
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func TestUCWriteAndSend(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeUC, defaultCap)
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(8192, allAccess)
	fill(am.Bytes(), 66)
	_, err := p.a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 4096)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey()}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCRDMAWrite, 1)
	// UC has no acknowledgements: poll the remote memory.
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(am.Bytes()[:4096], zm.Bytes()[:4096]) {
		require.True(t, time.Now().Before(deadline), "UC write did not land")
		time.Sleep(time.Millisecond)
	}
	_, err = p.z.PostRecv([]uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{zmr.SGE(4096, 4096)}}})
	require.NoError(t, err)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRSendWithImm, Imm: 9, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(4096, 2000)}}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 3)
	rc := wait(t, p.zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 2)
	require.EqualValues(t, 9, rc.Imm)
	require.Equal(t, am.Bytes()[4096:6096], zm.Bytes()[4096:6096])
	// UC has no reads or atomics.
	_, err = p.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey()}})
	require.ErrorIs(t, err, unix.EINVAL)
}

// udPair is two UD QPs with an AH from each to the other.
func (b *bed) udPair() (a, z *uverbs.QP, acq, zcq *uverbs.CQ, ah *uverbs.AH) {
	acq, zcq = b.cq(64, nil), b.cq(64, nil)
	a = b.qp(uverbs.QPTypeUD, acq, acq, defaultCap, nil)
	z = b.qp(uverbs.QPTypeUD, zcq, zcq, defaultCap, nil)
	for _, q := range []*uverbs.QP{a, z} {
		require.NoError(b.t, q.Connect(uverbs.Endpoint{}, 0, uverbs.ConnectParams{QKey: 0x11111111}))
	}
	ah, err := b.pd.CreateAH(uverbs.RoCEAH(1, b.gidx, b.gid))
	require.NoError(b.t, err)
	b.t.Cleanup(func() { require.NoError(b.t, ah.Close()) })
	return
}

func TestUDSendWithGRH(t *testing.T) {
	b := newBed(t)
	a, z, acq, zcq, ah := b.udPair()
	am, amr := b.mem(8192, allAccess)
	zm, zmr := b.mem(8192, allAccess)
	fill(am.Bytes(), 12)
	_, err := z.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{zmr.SGE(0, 40+2000)}}})
	require.NoError(t, err)
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSendWithImm, Imm: 0xabcd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 2000)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: 0x11111111}})
	require.NoError(t, err)
	requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 2)
	rc := wait(t, zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 1)
	require.EqualValues(t, 2040, rc.ByteLen, "UD receives count the 40-byte GRH")
	require.NotZero(t, rc.Flags&uverbs.WCWithGRH)
	require.Equal(t, a.QPN(), rc.SrcQP)
	require.EqualValues(t, 0xabcd, rc.Imm)
	require.Equal(t, am.Bytes()[:2000], zm.Bytes()[40:2040])

	// A wrong Q_Key is dropped by the receiver; the sender still completes.
	_, err = z.PostRecv([]uverbs.RecvWR{{WRID: 3, SGL: []uverbs.SGE{zmr.SGE(4096, 40+100)}}})
	require.NoError(t, err)
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 100)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: 0x22222222}})
	require.NoError(t, err)
	requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 4)
	// A marker datagram of another length with the right Q_Key, from the
	// same QP: receives are consumed in order, so receive 3 carries the
	// marker only if the wrong-Q_Key datagram was dropped.
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 5, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 60)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: 0x11111111}})
	require.NoError(t, err)
	requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 5)
	rc = wait(t, zcq, 1)[0]
	requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 3)
	require.EqualValues(t, 40+60, rc.ByteLen, "a datagram with the wrong Q_Key must not be delivered")
	// UD sends need an address handle; UD has no RDMA.
	_, err = a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteQPN: z.QPN()}})
	require.ErrorIs(t, err, unix.EINVAL)
	_, err = a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{amr.SGE(0, 8)}, AH: ah}})
	require.ErrorIs(t, err, unix.EINVAL)
}

// A bad rkey gives a remote access error, moves the QP to ERR, and the work
// requests behind it complete flushed.
func TestBadRKeyAndFlush(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	_, amr := b.mem(8192, allAccess)
	_, zmr := b.mem(8192, allAccess)
	n, err := p.a.PostSend([]uverbs.SendWR{
		{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 64)},
			RemoteAddr: zmr.Addr(), RKey: zmr.RKey() ^ 0x5a5a00},
		{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 64)},
			RemoteAddr: zmr.Addr(), RKey: zmr.RKey()},
		{WRID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 64)},
			RemoteAddr: zmr.Addr(), RKey: zmr.RKey()},
	})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	wcs := wait(t, p.acq, 3)
	require.Equal(t, uverbs.WCRemAccessErr, wcs[0].Status, wcs[0].Status.String())
	require.EqualValues(t, 1, wcs[0].WRID)
	for _, wc := range wcs[1:] {
		require.Equal(t, uverbs.WCWRFlushErr, wc.Status, "wr %d: %s", wc.WRID, wc.Status)
	}
	a, _, err := p.a.Query(uverbs.QPAttrState)
	require.NoError(t, err)
	require.Equal(t, uverbs.QPStateErr, a.State)

	// Receives outstanding when a QP enters ERR complete flushed too.
	_, err = p.z.PostRecv([]uverbs.RecvWR{{WRID: 10, SGL: []uverbs.SGE{zmr.SGE(0, 100)}}, {WRID: 11, SGL: []uverbs.SGE{zmr.SGE(0, 100)}}})
	require.NoError(t, err)
	require.NoError(t, p.z.ToErr())
	for i, wc := range wait(t, p.zcq, 2) {
		require.Equal(t, uverbs.WCWRFlushErr, wc.Status)
		require.EqualValues(t, 10+i, wc.WRID)
	}
}

func TestRNRRetry(t *testing.T) {
	b := newBed(t)
	_, amr := b.mem(4096, allAccess)
	_, zmr := b.mem(4096, allAccess)
	// With infinite RNR retries a send waits for the receive to be posted.
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	rnr := rnrCounter(t, b)
	_, err := p.a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 100)}}})
	require.NoError(t, err)
	// The requester counts the responder's RNR NAK (rxe_comp.c: RXE_CNT_RCV_RNR):
	// once it has, the send provably reached a QP without a receive and
	// is waiting to retry.
	deadline := time.Now().Add(10 * time.Second)
	for rnrCounter(t, b) == rnr {
		require.True(t, time.Now().Before(deadline), "no RNR NAK for a send without a receive")
		time.Sleep(time.Millisecond)
	}
	k, err := p.acq.Poll(make([]uverbs.WC, 1))
	require.NoError(t, err)
	require.Zero(t, k, "the send cannot complete without a receive")
	_, err = p.z.PostRecv([]uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{zmr.SGE(0, 4096)}}})
	require.NoError(t, err)
	requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 1)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 2)

	// Without retries it fails with RNR_RETRY_EXC_ERR.
	acq, zcq := b.cq(8, nil), b.cq(8, nil)
	a := b.qp(uverbs.QPTypeRC, acq, acq, defaultCap, nil)
	z := b.qp(uverbs.QPTypeRC, zcq, zcq, defaultCap, nil)
	pa := b.params()
	pa.RNRRetry, pa.MinRNRTimer = 0, 1
	pa.RNRRetry = 0
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 1, GID: b.gid}, 2, pa))
	zeroRetry := pa
	require.NoError(t, a.Init(zeroRetry))
	require.NoError(t, a.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: b.mtu, DestQPN: z.QPN(), RQPSN: 2,
		AH: uverbs.RoCEAH(1, b.gidx, b.gid), MaxDestRdAtomic: 1, MinRNRTimer: 1},
		uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer))
	require.NoError(t, a.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 0, MaxRdAtomic: 1},
		uverbs.QPAttrState|uverbs.QPAttrSQPSN|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|uverbs.QPAttrRNRRetry|uverbs.QPAttrMaxQPRdAtomic))
	_, err = a.PostSend([]uverbs.SendWR{{WRID: 5, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 10)}}})
	require.NoError(t, err)
	wc := wait(t, acq, 1)[0]
	require.Equal(t, uverbs.WCRNRRetryExcErr, wc.Status, wc.Status.String())
}

// rnrCounter reads the port's count of RNR NAKs received.
func rnrCounter(t testing.TB, b *bed) int {
	t.Helper()
	raw, err := os.ReadFile("/sys/class/infiniband/" + b.vm.Dev + "/ports/1/hw_counters/rcvd_rnr_err")
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	return n
}

// Posting beyond a queue's depth is refused; nothing already posted is
// overwritten.
func TestQueueDepth(t *testing.T) {
	b := newBed(t)
	ch, err := b.ctx.CreateCompChannel()
	require.NoError(t, err)
	defer ch.Close()
	cq := b.cq(64, ch)
	cp := uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	qp := b.qp(uverbs.QPTypeRC, cq, cq, cp, nil)
	require.NoError(t, qp.Init(b.params()))
	_, zmr := b.mem(4096, allAccess)
	wrs := make([]uverbs.RecvWR, 64)
	for i := range wrs {
		wrs[i] = uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{zmr.SGE(i*16, 16)}}
	}
	n, err := qp.PostRecv(wrs)
	require.ErrorIs(t, err, rxe.ErrQueueFull)
	require.ErrorIs(t, err, unix.ENOMEM)
	require.GreaterOrEqual(t, n, 4)
	require.Less(t, n, 64)
	// All n are really there: flushing the QP returns exactly them, in order.
	require.NoError(t, qp.ToErr())
	wcs := wait(t, cq, n)
	require.Len(t, wcs, n)
	for i, wc := range wcs {
		require.Equal(t, uverbs.WCWRFlushErr, wc.Status)
		require.EqualValues(t, i, wc.WRID)
	}
	// No more: arm, then poll (a completion that came before the arm is
	// still in the queue), then expect no event (one that comes after it
	// raises one). rxe flushes the receive queue in one pass.
	require.NoError(t, cq.ReqNotify(false))
	k, _ := cq.Poll(make([]uverbs.WC, 8))
	require.Zero(t, k, "more flushed receives than were posted")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = ch.GetEvent(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "more flushed receives than were posted")
	// A QP in RESET takes no receives.
	rq := b.qp(uverbs.QPTypeRC, cq, cq, cp, nil)
	_, err = rq.PostRecv(wrs[:1])
	require.ErrorIs(t, err, unix.EINVAL)
	// A send before RTS: the doorbell says so.
	_, amr := b.mem(4096, allAccess)
	_, err = rq.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{amr.SGE(0, 8)}}})
	require.Error(t, err)
}

// A CQ that overflows is reported with a CQ_ERR async event, not silently.
func TestCQOverflowIsReported(t *testing.T) {
	b := newBed(t)
	small := b.cq(1, nil)
	big := b.cq(64, nil)
	a := b.qp(uverbs.QPTypeRC, small, small, defaultCap, nil)
	z := b.qp(uverbs.QPTypeRC, big, big, defaultCap, nil)
	require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, b.params()))
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, b.params()))
	_, amr := b.mem(4096, allAccess)
	_, zmr := b.mem(4096, allAccess)
	wrs := make([]uverbs.SendWR, small.CQE()+8)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey()}
	}
	_, err := a.PostSend(wrs)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := b.ctx.GetAsyncEvent(ctx)
		require.NoError(t, err, "no CQ_ERR event for the overflowing CQ")
		if ev.Type == uverbs.EventCQErr {
			require.Same(t, small, ev.CQ)
			break
		}
		t.Logf("event %s", ev.Type)
	}
}

func TestCompletionEvents(t *testing.T) {
	b := newBed(t)
	ch, err := b.ctx.CreateCompChannel()
	require.NoError(t, err)
	defer ch.Close()
	acq := b.cq(16, nil)
	zcq := b.cq(16, ch)
	a := b.qp(uverbs.QPTypeRC, acq, acq, defaultCap, nil)
	z := b.qp(uverbs.QPTypeRC, zcq, zcq, defaultCap, nil)
	require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, b.params()))
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, b.params()))
	_, amr := b.mem(4096, allAccess)
	_, zmr := b.mem(4096, allAccess)
	send := func(id uint64, flags uverbs.SendFlags) {
		_, err := z.PostRecv([]uverbs.RecvWR{{WRID: id, SGL: []uverbs.SGE{zmr.SGE(0, 64)}}})
		require.NoError(t, err)
		_, err = a.PostSend([]uverbs.SendWR{{WRID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | flags, SGL: []uverbs.SGE{amr.SGE(0, 64)}}})
		require.NoError(t, err)
		requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, id)
	}
	getEvent := func(d time.Duration) (*uverbs.CQ, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return ch.GetEvent(ctx)
	}
	// Armed for any completion: a receive raises one event.
	require.NoError(t, zcq.ReqNotify(false))
	send(1, 0)
	got, err := getEvent(10 * time.Second)
	require.NoError(t, err)
	require.Same(t, zcq, got)
	requireWC(t, wait(t, zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 1)
	got.AckEvents(1)
	d, ak := zcq.Events()
	require.Equal(t, [2]int{1, 1}, [2]int{d, ak})
	// Not re-armed: no event for the next completion. Proof by a marker:
	// arm, complete another receive and take its event; an event for
	// receive 2 would have been queued before it, so the channel must then
	// be empty (the short deadline waits for nothing that is still due).
	send(2, 0)
	requireWC(t, wait(t, zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 2)
	oneEvent := func(marker uint64, flags uverbs.SendFlags) {
		t.Helper()
		send(marker, flags)
		got, err := getEvent(10 * time.Second)
		require.NoError(t, err)
		require.Same(t, zcq, got)
		requireWC(t, wait(t, zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, marker)
		got.AckEvents(1)
		_, err = getEvent(200 * time.Millisecond)
		require.ErrorIs(t, err, context.DeadlineExceeded, "an event for a completion that was not armed for")
	}
	require.NoError(t, zcq.ReqNotify(false))
	oneEvent(5, 0)
	// Armed for solicited completions only: a plain send raises nothing, a
	// solicited one does. Re-arming before the solicited marker undoes a
	// wrong disarm by receive 3, so a wrong event shows as a second one.
	require.NoError(t, zcq.ReqNotify(true))
	send(3, 0)
	requireWC(t, wait(t, zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 3)
	require.NoError(t, zcq.ReqNotify(true))
	oneEvent(4, uverbs.SendSolicited)
	d, ak = zcq.Events()
	require.Equal(t, [2]int{3, 3}, [2]int{d, ak})
}

func TestSRQDatapathAndLimitEvent(t *testing.T) {
	b := newBed(t)
	srq, err := b.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, srq.Close()) }()
	acq, zcq := b.cq(64, nil), b.cq(64, nil)
	a := b.qp(uverbs.QPTypeRC, acq, acq, defaultCap, nil)
	z, err := b.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: zcq, RecvCQ: zcq, SRQ: srq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	require.NoError(t, err)
	defer func() { require.NoError(t, z.Close()) }()
	require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, b.params()))
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, b.params()))
	am, amr := b.mem(4096, allAccess)
	zm, zmr := b.mem(1<<16, allAccess)
	wrs := make([]uverbs.RecvWR, 8)
	for i := range wrs {
		wrs[i] = uverbs.RecvWR{WRID: uint64(100 + i), SGL: []uverbs.SGE{zmr.SGE(i*1024, 1024)}}
	}
	n, err := srq.PostRecv(wrs)
	require.NoError(t, err)
	require.Equal(t, 8, n)
	require.NoError(t, srq.Modify(uverbs.SRQAttr{Limit: 4}, uverbs.SRQAttrLimit))
	fill(am.Bytes(), 50)
	for i := 0; i < 5; i++ {
		_, err := a.PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{amr.SGE(i, 500)}}})
		require.NoError(t, err)
		requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, uint64(i))
		rc := wait(t, zcq, 1)[0]
		requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, uint64(100+i))
		require.Equal(t, am.Bytes()[i:i+500], zm.Bytes()[i*1024:i*1024+500])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := b.ctx.GetAsyncEvent(ctx)
		require.NoError(t, err, "no SRQ_LIMIT_REACHED after the SRQ fell below its limit")
		if ev.Type == uverbs.EventSRQLimitReached {
			require.Same(t, srq, ev.SRQ)
			break
		}
	}
	// The limit disarms itself once it fires.
	q, err := srq.Query()
	require.NoError(t, err)
	require.Zero(t, q.Limit)
}

func TestPostAfterCloseAndErrors(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	_, amr := b.mem(4096, allAccess)
	// A bind carries no data (rxe.c: validate_send_wr).
	_, err := p.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, SGL: []uverbs.SGE{amr.SGE(0, 8)}}})
	require.ErrorIs(t, err, unix.EINVAL)
	// Misaligned atomic.
	_, err = p.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: 3}})
	require.ErrorIs(t, err, unix.EINVAL)
	var ue *uverbs.Error
	require.True(t, errors.As(err, &ue))
}

// A resize the kernel rejects leaves the SRQ usable: PostRecv and Close
// return (rxe once kept its ring locked after a failed MODIFY_SRQ).
func TestSRQRejectedResizeReleasesQueue(t *testing.T) {
	b := newBed(t)
	srq, err := b.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	require.NoError(t, err)
	_, zmr := b.mem(4096, allAccess)
	err = srq.Modify(uverbs.SRQAttr{MaxWR: 1 << 30}, uverbs.SRQAttrMaxWR)
	require.ErrorIs(t, err, unix.EINVAL, "rxe refuses more than max_srq_wr")
	done := make(chan error, 1)
	go func() {
		_, err := srq.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{zmr.SGE(0, 64)}}})
		if err == nil {
			err = srq.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		// The context cannot be closed either: end the binary with the reason.
		panic("SRQ PostRecv/Close did not return after a rejected resize: its ring lock is still held")
	}
}

// Inline data is copied only from memory registered under the SGE's lkey in
// the QP's PD; anything else is EINVAL, never a fault (an MR's custom IOVA
// is not an address of this process).
func TestInlineSendChecksRegisteredMemory(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	m, err := uverbs.AllocMemory(4096, uverbs.MemoryOptions{})
	require.NoError(t, err)
	defer m.Close()
	imr, err := b.pd.RegMRIOVA(m.Bytes(), 0x10000000, allAccess)
	require.NoError(t, err)
	defer imr.Close()
	am, amr := b.mem(4096, allAccess)
	zm, zmr := b.mem(4096, allAccess)
	wrongKey := amr.SGE(0, 64)
	wrongKey.LKey = imr.LKey()
	for name, sge := range map[string]uverbs.SGE{
		"custom IOVA":    imr.SGE(0, 64),
		"other MR's key": wrongKey,
		"past the end":   amr.SGE(4096-32, 64),
		"unknown key":    {Addr: amr.Addr(), Length: 64, LKey: 0xdead},
	} {
		n, err := p.a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
			SGL: []uverbs.SGE{sge}}})
		require.Zero(t, n, name)
		require.ErrorIs(t, err, unix.EINVAL, name)
	}
	// Nothing was posted, and the QP still sends inline from registered memory.
	fill(am.Bytes()[:64], 3)
	_, err = p.z.PostRecv([]uverbs.RecvWR{{WRID: 7, SGL: []uverbs.SGE{zmr.SGE(0, 4096)}}})
	require.NoError(t, err)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{amr.SGE(0, 64)}}})
	require.NoError(t, err)
	wcs := waitFor(t, p.acq, 8)
	require.Len(t, wcs, 1)
	requireWC(t, wcs[0], uverbs.WCSuccess, uverbs.WCSend, 8)
	requireWC(t, wait(t, p.zcq, 1)[0], uverbs.WCSuccess, uverbs.WCRecv, 7)
	require.Equal(t, am.Bytes()[:64], zm.Bytes()[:64])
}

// Resizing a CQ while another goroutine polls it delivers every completion
// exactly once: the kernel copies the pending entries into the new ring and
// advances the old ring's consumer index itself, so a poll running across
// the resize would see some twice or lose some. Each round leaves a batch
// of completions pending, then polls and resizes at once.
func TestCQResizeWhilePolling(t *testing.T) {
	const batch, rounds = 100, 30
	b := newBed(t)
	cq := b.cq(4*batch, nil)
	zcq := b.cq(64, nil)
	a := b.qp(uverbs.QPTypeRC, cq, cq, uverbs.QPCap{MaxSendWR: 2 * batch, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, nil)
	z := b.qp(uverbs.QPTypeRC, zcq, zcq, defaultCap, nil)
	require.NoError(t, a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 1, GID: b.gid}, 2, b.params()))
	require.NoError(t, z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 2, GID: b.gid}, 1, b.params()))
	am, amr := b.mem(4096, allAccess)
	zm, zmr := b.mem(4096, allAccess)
	wrs := make([]uverbs.SendWR, batch)
	sizes := []int{2 * batch, 4 * batch, 3 * batch}
	for round := 0; round < rounds; round++ {
		// The last write of the batch carries the round number: once it has
		// landed, (nearly) the whole batch waits in the CQ.
		binary.LittleEndian.PutUint64(am.Bytes(), uint64(round+1))
		for i := range wrs {
			wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: zmr.Addr() + 8, RKey: zmr.RKey()}
		}
		wrs[batch-1].RemoteAddr = zmr.Addr()
		n, err := a.PostSend(wrs)
		require.NoError(t, err)
		require.Equal(t, batch, n)
		deadline := time.Now().Add(20 * time.Second)
		for binary.LittleEndian.Uint64(zm.Bytes()) != uint64(round+1) {
			require.True(t, time.Now().Before(deadline), "round %d: the batch did not land", round)
			runtime.Gosched()
		}
		seen := make([]int, batch)
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			wc := make([]uverbs.WC, 4)
			got := 0
			close(started)
			for got < batch && time.Now().Before(deadline) {
				// One at a time, slowly: the batch's consumption then spans
				// the resize instead of finishing before it.
				for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
				}
				n, err := cq.Poll(wc[:1])
				if err != nil {
					done <- err
					return
				}
				for _, w := range wc[:n] {
					if w.Status != uverbs.WCSuccess || w.WRID >= batch {
						done <- fmt.Errorf("completion %+v", w)
						return
					}
					seen[w.WRID]++
				}
				got += n
			}
			if got != batch {
				done <- fmt.Errorf("%d of %d completions", got, batch)
				return
			}
			done <- nil
		}()
		<-started
		require.NoError(t, cq.Resize(sizes[round%len(sizes)]))
		require.NoError(t, <-done, "round %d", round)
		for i, n := range seen {
			require.Equal(t, 1, n, "round %d: work request %d completed %d times", round, i, n)
		}
		k, err := cq.Poll(make([]uverbs.WC, 4))
		require.NoError(t, err)
		require.Zero(t, k, "round %d: more completions than work requests", round)
	}
}
