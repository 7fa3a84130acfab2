//go:build linux

package uverbs_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// rdma-core tests/test_atomic.py's bad flows: a fetch-and-add the responder
// must not perform (its QP or MR lacks remote atomic access, or the rkey is
// wrong) completes with the remote error and leaves the target word as it
// was; a bad local lkey is the requester's local protection error.
func TestAtomicBadFlows(t *testing.T) {
	b := newBed(t)
	for _, c := range []struct {
		name     string
		qpAccess uverbs.Access // the responder QP's (0: the default, with remote atomic)
		mrAccess uverbs.Access // the target MR's
		badLKey  bool
		badRKey  bool
		status   uverbs.WCStatus
		applied  bool // whether the remote word changes anyway
	}{
		{name: "test_atomic_invalid_qp_access", qpAccess: uverbs.AccessLocalWrite,
			mrAccess: uverbs.AccessLocalWrite | uverbs.AccessRemoteAtomic, status: uverbs.WCRemInvReqErr},
		{name: "test_atomic_invalid_mr_access", mrAccess: uverbs.AccessLocalWrite, status: uverbs.WCRemAccessErr},
		{name: "test_atomic_invalid_rkey", mrAccess: uverbs.AccessLocalWrite | uverbs.AccessRemoteAtomic, badRKey: true,
			status: uverbs.WCRemAccessErr},
		// The responder performs the atomic; the requester cannot store the
		// original value (rxe's completer: copy_data fails).
		{name: "test_atomic_invalid_lkey", mrAccess: uverbs.AccessLocalWrite | uverbs.AccessRemoteAtomic, badLKey: true,
			status: uverbs.WCLocProtErr, applied: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &pair{b: b, acq: b.cq(16, nil), zcq: b.cq(16, nil)}
			p.a = b.qp(uverbs.QPTypeRC, p.acq, p.acq, defaultCap, nil)
			p.z = b.qp(uverbs.QPTypeRC, p.zcq, p.zcq, defaultCap, nil)
			params := b.params()
			require.NoError(t, p.a.Connect(uverbs.Endpoint{QPN: p.z.QPN(), PSN: 200, GID: b.gid}, 100, params))
			params.Access = c.qpAccess
			require.NoError(t, p.z.Connect(uverbs.Endpoint{QPN: p.a.QPN(), PSN: 100, GID: b.gid}, 200, params))
			am, amr := b.mem(4096, uverbs.AccessLocalWrite)
			zm, zmr := b.mem(4096, c.mrAccess)
			binary.LittleEndian.PutUint64(zm.Bytes(), 1000)
			sge, rkey := amr.SGE(0, 8), zmr.RKey()
			if c.badLKey {
				sge.LKey++
			}
			if c.badRKey {
				rkey++
			}
			_, err := p.a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}, RemoteAddr: zmr.Addr(), RKey: rkey, CompareAdd: 5}})
			require.NoError(t, err)
			wc := wait(t, p.acq, 1)[0]
			require.EqualValues(t, 1, wc.WRID)
			require.Equal(t, c.status, wc.Status, wc.Status.String())
			want := uint64(1000)
			if c.applied {
				want = 1005
			}
			require.Equal(t, want, binary.LittleEndian.Uint64(zm.Bytes()), "the target word")
			require.Zero(t, binary.LittleEndian.Uint64(am.Bytes()), "no original value was stored locally")
		})
	}
}
