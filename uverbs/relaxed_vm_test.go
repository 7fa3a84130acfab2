//go:build linux

package uverbs_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// rdma-core tests/test_relaxed_ordering.py: memory registered with
// IBV_ACCESS_RELAXED_ORDERING (an optional flag: a device without it, rxe,
// registers the memory anyway) carries RC sends, UD sends and RDMA writes
// byte for byte.
func TestRelaxedOrderingTraffic(t *testing.T) {
	b := newBed(t)
	ro := uverbs.AccessRelaxedOrdering
	for i := 0; i < 10; i++ {
		size := 100 + 411*i
		// test_ro_rc_traffic
		p := b.pair(uverbs.QPTypeRC, defaultCap)
		am, amr := b.mem(8192, uverbs.AccessLocalWrite|ro)
		zm, zmr := b.mem(8192, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|ro)
		fill(am.Bytes()[:size], byte(i))
		_, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{zmr.SGE(0, 8192)}}})
		require.NoError(t, err)
		_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, size)}}})
		require.NoError(t, err)
		requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, 2)
		rc := wait(t, p.zcq, 1)[0]
		requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, 1)
		require.EqualValues(t, size, rc.ByteLen)
		require.True(t, bytes.Equal(am.Bytes()[:size], zm.Bytes()[:size]), "RC send payload")

		// test_ro_mr_ex_traffic: RDMA WRITE into relaxed-ordering memory.
		fill(am.Bytes()[:size], byte(i+100))
		_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{amr.SGE(0, size)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey()}})
		require.NoError(t, err)
		requireWC(t, wait(t, p.acq, 1)[0], uverbs.WCSuccess, uverbs.WCRDMAWrite, 3)
		require.True(t, bytes.Equal(am.Bytes()[:size], zm.Bytes()[:size]), "RDMA write payload")
	}

	// test_ro_ud_traffic
	a, z, acq, zcq, ah := b.udPair()
	am, amr := b.mem(8192, uverbs.AccessLocalWrite|ro)
	zm, zmr := b.mem(8192, uverbs.AccessLocalWrite|ro)
	for i := 0; i < 10; i++ {
		size := 50 + 300*i
		fill(am.Bytes()[:size], byte(i*3))
		_, err := z.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{zmr.SGE(0, 40+size)}}})
		require.NoError(t, err)
		_, err = a.PostSend([]uverbs.SendWR{{WRID: uint64(100 + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{amr.SGE(0, size)}, AH: ah, RemoteQPN: z.QPN(), RemoteQKey: 0x11111111}})
		require.NoError(t, err)
		requireWC(t, wait(t, acq, 1)[0], uverbs.WCSuccess, uverbs.WCSend, uint64(100+i))
		rc := wait(t, zcq, 1)[0]
		requireWC(t, rc, uverbs.WCSuccess, uverbs.WCRecv, uint64(i))
		require.EqualValues(t, 40+size, rc.ByteLen)
		require.True(t, bytes.Equal(am.Bytes()[:size], zm.Bytes()[40:40+size]), "UD payload")
	}
}
