//go:build linux

package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func TestRCSendRecv(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	am, amr := b.mem(4096, uverbs.AccessLocalWrite)
	zm, zmr := b.mem(4096, uverbs.AccessLocalWrite)
	src, dst := am.Bytes(), zm.Bytes()
	fill(src[:1000], 3)

	n, err := p.z.PostRecv([]uverbs.RecvWR{{WRID: 77, SGL: []uverbs.SGE{zmr.SGE(0, 4096)}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = p.a.PostSend([]uverbs.SendWR{{WRID: 11, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0xdeadbeef,
		SGL: []uverbs.SGE{amr.SGE(0, 1000)}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	sc := wait(t, p.acq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, sc.Status, sc.Status.String())
	require.Equal(t, uverbs.WCSend, sc.Opcode)
	require.EqualValues(t, 11, sc.WRID)
	rc := wait(t, p.zcq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, rc.Status, rc.Status.String())
	require.Equal(t, uverbs.WCRecv, rc.Opcode)
	require.EqualValues(t, 77, rc.WRID)
	require.EqualValues(t, 1000, rc.ByteLen)
	require.NotZero(t, rc.Flags&uverbs.WCWithImm)
	require.EqualValues(t, uint32(0xdeadbeef), rc.Imm)
	require.Equal(t, p.z.QPN(), rc.QPN)
	require.True(t, bytes.Equal(src[:1000], dst[:1000]), "received bytes differ")
}

func TestRCRDMAWriteReadAtomics(t *testing.T) {
	b := newBed(t)
	p := b.pair(uverbs.QPTypeRC, defaultCap)
	all := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
	am, amr := b.mem(8192, all)
	zm, zmr := b.mem(8192, all)
	src, dst := am.Bytes(), zm.Bytes()
	fill(src[:4096], 9)

	// RDMA write a -> z
	_, err := p.a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 4096)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey()}})
	require.NoError(t, err)
	wc := wait(t, p.acq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, wc.Status, wc.Status.String())
	require.Equal(t, uverbs.WCRDMAWrite, wc.Opcode)
	require.True(t, bytes.Equal(src[:4096], dst[:4096]))

	// RDMA read z -> a (into the second half)
	fill(dst[4096:8192], 42)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(4096, 4096)}, RemoteAddr: zmr.Addr() + 4096, RKey: zmr.RKey()}})
	require.NoError(t, err)
	wc = wait(t, p.acq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, wc.Status, wc.Status.String())
	require.Equal(t, uverbs.WCRDMARead, wc.Opcode)
	require.EqualValues(t, 4096, wc.ByteLen)
	require.True(t, bytes.Equal(src[4096:8192], dst[4096:8192]))

	// fetch-and-add and compare-and-swap on an 8-byte word of z
	binary.LittleEndian.PutUint64(dst[0:], 1000)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(0, 8)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey(), CompareAdd: 5}})
	require.NoError(t, err)
	wc = wait(t, p.acq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, wc.Status, wc.Status.String())
	require.Equal(t, uverbs.WCFetchAdd, wc.Opcode)
	require.EqualValues(t, 1000, binary.LittleEndian.Uint64(src[0:]), "the old value comes back")
	require.EqualValues(t, 1005, binary.LittleEndian.Uint64(dst[0:]))

	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{amr.SGE(8, 8)}, RemoteAddr: zmr.Addr(), RKey: zmr.RKey(), CompareAdd: 1005, Swap: 77}})
	require.NoError(t, err)
	wc = wait(t, p.acq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, wc.Status, wc.Status.String())
	require.Equal(t, uverbs.WCCompSwap, wc.Opcode)
	require.EqualValues(t, 1005, binary.LittleEndian.Uint64(src[8:]))
	require.EqualValues(t, 77, binary.LittleEndian.Uint64(dst[0:]))
}
