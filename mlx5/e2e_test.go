package mlx5

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

const (
	keyA = 0x1100
	keyB = 0x2200
)

type pair struct {
	dev        *devModel
	a, b       *devQP
	memA, memB []byte
}

// newPair makes two QPs of one modelled device, connected (RC/UC) to each
// other, each with its own CQs of ncqe entries and a 64 KiB region.
func newPair(t *testing.T, typ uverbs.QPType, sendWR, recvWR uint32, ncqe num) *pair {
	p := &pair{dev: newDevModel(), memA: make([]byte, 1<<16), memB: make([]byte, 1<<16)}
	mk := func(qpn num) *devQP {
		v := vQP{Type: num(typ), QPN: qpn, BfregIndex: 24,
			Requested: vCap{MaxSendWR: num(sendWR), MaxRecvWR: num(recvWR), MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}}
		r := newRig(t, v, vCQ{CQN: 0x400, CQECnt: ncqe}, vCQ{CQN: 0x401, CQECnt: ncqe})
		return p.dev.addQP(r, 0)
	}
	p.a, p.b = mk(0x1a0), mk(0x1a1)
	p.a.peer, p.b.peer = p.b.qpn, p.a.qpn
	p.dev.reg(keyA, p.memA)
	p.dev.reg(keyB, p.memB)
	return p
}

func sge(b []byte, off, n int, key uint32) uverbs.SGE {
	return uverbs.SGE{Addr: memAddr(b[off:]), Length: uint32(n), LKey: key}
}

func (p *pair) post(t *testing.T, q *devQP, wrs ...uverbs.SendWR) {
	t.Helper()
	n, err := q.r.sq.post(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	require.NoError(t, p.dev.ring(q))
}

func (p *pair) recv(t *testing.T, q *devQP, wrs ...uverbs.RecvWR) {
	t.Helper()
	n, err := q.r.rq.post(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
}

func poll(t *testing.T, c *cqRing, want int) []uverbs.WC {
	t.Helper()
	wc := make([]uverbs.WC, want+1)
	n, err := c.poll(wc)
	require.NoError(t, err)
	require.Equal(t, want, n, "completions")
	return wc[:n]
}

// Send/receive over RC through many laps of small SQ, RQ and CQ rings,
// inline and gathered, signalled and not.
func TestModelRCSendRecvWrap(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 4, 4, 8)
	for i := 0; i < 200; i++ {
		msg := p.memA[:40]
		binary.BigEndian.PutUint64(msg, uint64(i))
		p.recv(t, p.b, uverbs.RecvWR{WRID: uint64(1000 + i), SGL: []uverbs.SGE{sge(p.memB, 0, 16, keyB), sge(p.memB, 100, 64, keyB)}})
		flags := uverbs.SendSignaled
		if i%3 == 0 {
			flags |= uverbs.SendInline
		}
		op := uverbs.WRSend
		if i%2 == 1 {
			op = uverbs.WRSendWithImm
		}
		p.post(t, p.a, uverbs.SendWR{WRID: uint64(i), Opcode: op, Flags: flags, Imm: uint32(i) * 7,
			SGL: []uverbs.SGE{sge(p.memA, 0, 8, keyA), sge(p.memA, 8, 32, keyA)}})
		wc := poll(t, p.a.r.scq, 1)
		require.Equal(t, uverbs.WC{WRID: uint64(i), Opcode: uverbs.WCSend, QPN: p.a.qpn, Flags: wc[0].Flags}, wc[0])
		wc = poll(t, p.b.r.rcq, 1)
		require.Equal(t, uint64(1000+i), wc[0].WRID)
		require.Equal(t, uverbs.WCSuccess, wc[0].Status)
		require.Equal(t, uverbs.WCRecv, wc[0].Opcode)
		require.Equal(t, uint32(40), wc[0].ByteLen)
		require.Equal(t, p.a.qpn, wc[0].SrcQP)
		if op == uverbs.WRSendWithImm {
			require.Equal(t, uverbs.WCWithImm, wc[0].Flags)
			require.Equal(t, uint32(i)*7, wc[0].Imm)
		}
		require.Equal(t, uint64(i), binary.BigEndian.Uint64(p.memB[0:8]))
		require.Equal(t, p.memA[8:16], p.memB[8:16])
		require.Equal(t, p.memA[16:40], p.memB[100:124])
	}
	require.Greater(t, p.a.r.sq.curPost, 4*p.a.r.lay.sqWQECnt, "the SQ wrapped several times")
	require.Greater(t, p.a.r.scq.consIndex, 8*p.a.r.scq.ncqe, "the CQ wrapped several times")
}

// Unsignalled WQEs are retired by a later signalled one (one CQE).
func TestModelUnsignaledRetired(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 8, 8, 16)
	for round := 0; round < 10; round++ {
		var wrs []uverbs.SendWR
		for i := 0; i < 7; i++ {
			f := uverbs.SendFlags(0)
			if i == 6 {
				f = uverbs.SendSignaled
			}
			wrs = append(wrs, uverbs.SendWR{WRID: uint64(round*10 + i), Opcode: uverbs.WRRDMAWrite, Flags: f,
				RemoteAddr: memAddr(p.memB[64*i:]), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 0, 64, keyA)}})
		}
		p.post(t, p.a, wrs...)
		wc := poll(t, p.a.r.scq, 1)
		require.Equal(t, uint64(round*10+6), wc[0].WRID)
		require.Equal(t, uverbs.WCRDMAWrite, wc[0].Opcode)
		require.Equal(t, p.a.r.sq.head, p.a.r.sq.tail.Load(), "all seven retired")
	}
}

func TestModelWriteImmReadAtomics(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 8, 8, 16)
	copy(p.memA, "remote write payload")
	p.recv(t, p.b, uverbs.RecvWR{WRID: 77})
	p.post(t, p.a, uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: 0xdeadbeef,
		RemoteAddr: memAddr(p.memB[512:]), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 0, 20, keyA)}})
	require.Equal(t, "remote write payload", string(p.memB[512:532]))
	wc := poll(t, p.b.r.rcq, 1)
	require.Equal(t, uverbs.WC{WRID: 77, Opcode: uverbs.WCRecvRDMAWithImm, ByteLen: 20, Imm: 0xdeadbeef, QPN: p.b.qpn,
		SrcQP: p.a.qpn, Flags: uverbs.WCWithImm, PkeyIndex: 0xbeef}, wc[0])
	require.Equal(t, uverbs.WCRDMAWrite, poll(t, p.a.r.scq, 1)[0].Opcode)

	copy(p.memB[1024:], "read me back")
	p.post(t, p.a, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: memAddr(p.memB[1024:]), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 2048, 12, keyA)}})
	wc = poll(t, p.a.r.scq, 1)
	require.Equal(t, uverbs.WC{WRID: 2, Opcode: uverbs.WCRDMARead, ByteLen: 12, QPN: p.a.qpn}, wc[0])
	require.Equal(t, "read me back", string(p.memA[2048:2060]))

	target := p.memB[4096:4104]
	binary.BigEndian.PutUint64(target, 100)
	p.post(t, p.a, uverbs.SendWR{WRID: 3, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled, CompareAdd: 5,
		RemoteAddr: memAddr(target), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 4096, 8, keyA)}})
	wc = poll(t, p.a.r.scq, 1)
	require.Equal(t, uverbs.WC{WRID: 3, Opcode: uverbs.WCFetchAdd, ByteLen: 8, QPN: p.a.qpn}, wc[0])
	require.Equal(t, uint64(105), binary.BigEndian.Uint64(target))
	require.Equal(t, uint64(100), binary.BigEndian.Uint64(p.memA[4096:]))

	p.post(t, p.a, uverbs.SendWR{WRID: 4, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled, CompareAdd: 105, Swap: 7,
		RemoteAddr: memAddr(target), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 4096, 8, keyA)}})
	wc = poll(t, p.a.r.scq, 1)
	require.Equal(t, uverbs.WCCompSwap, wc[0].Opcode)
	require.Equal(t, uint64(7), binary.BigEndian.Uint64(target))
	require.Equal(t, uint64(105), binary.BigEndian.Uint64(p.memA[4096:]))
}

func TestModelUD(t *testing.T) {
	p := newPair(t, uverbs.QPTypeUD, 4, 4, 8)
	a := buildAV(AVParams{Ethernet: true, RoCEv2: true, UDPSrcPort: 0xc001, IsGlobal: true, SGIDIndex: 3, HopLimit: 64})
	ah := new(uverbs.AH)
	p.a.r.ahs[ah] = &a
	for i := 0; i < 20; i++ {
		p.recv(t, p.b, uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{sge(p.memB, 0, 256, keyB)}})
		p.post(t, p.a, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
			AH: ah, RemoteQPN: p.b.qpn, RemoteQKey: 0x11111111, SGL: []uverbs.SGE{sge(p.memA, 0, 50, keyA)}})
		require.Equal(t, uint64(i), poll(t, p.a.r.scq, 1)[0].WRID)
		wc := poll(t, p.b.r.rcq, 1)[0]
		require.Equal(t, uverbs.WC{WRID: uint64(i), Opcode: uverbs.WCRecv, ByteLen: 50, QPN: p.b.qpn, SrcQP: p.a.qpn,
			Flags: uverbs.WCWithGRH}, wc)
	}
	// A UD post without an mlx5 AH is refused, nothing rung.
	before := p.a.r.sq.curPost
	_, err := p.a.r.sq.post([]uverbs.SendWR{{Opcode: uverbs.WRSend, RemoteQPN: p.b.qpn}})
	require.Error(t, err)
	require.Equal(t, before, p.a.r.sq.curPost)
}

func TestModelSRQ(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 8, 8, 16)
	maxN, _, maxGS, shift, err := calcSRQ(7, 1, testCtxResp())
	require.NoError(t, err)
	mem := alignedMem(int(2*maxN) << shift)
	s := &srqQueue{buf: memPtr(mem), wrid: make([]uint64, 2*maxN), max: maxN, maxGS: maxGS, shift: shift, dbrec: new(uint32)}
	s.local = testLocal
	s.init()
	res := p.b.r.rsc.find(0)
	res.srq, res.rq = s, nil
	p.b.srq = s
	for round := 0; round < 5; round++ {
		for i := 0; i < 7; i++ {
			n, err := s.post([]uverbs.RecvWR{{WRID: uint64(100*round + i), SGL: []uverbs.SGE{sge(p.memB, 64*i, 64, keyB)}}})
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		_, err := s.post([]uverbs.RecvWR{{WRID: 999}})
		require.ErrorIs(t, err, ErrQueueFull, "an SRQ of max_wr 7 holds 7")
		for i := 0; i < 7; i++ {
			p.post(t, p.a, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{sge(p.memA, 0, 10, keyA)}})
		}
		wc := poll(t, p.b.r.rcq, 7)
		for i := range wc {
			require.Equal(t, uint64(100*round+i), wc[i].WRID)
			require.Equal(t, uint32(10), wc[i].ByteLen)
		}
		// Completed unsignalled sends are retired by a signalled one.
		p.post(t, p.a, uverbs.SendWR{WRID: 50, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 0, 1, keyA)}})
		poll(t, p.a.r.scq, 1)
	}
}

// A bad lkey fails the WQE with LOC_PROT, the QP goes to error and later
// WQEs are flushed; a bad rkey gives REM_ACCESS; a receive that is not
// posted gives RNR retry exceeded.
func TestModelErrors(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 8, 8, 16)
	p.recv(t, p.a, uverbs.RecvWR{WRID: 500, SGL: []uverbs.SGE{sge(p.memA, 0, 8, keyA)}})
	p.post(t, p.a,
		uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: memAddr(p.memB), RKey: keyB,
			SGL: []uverbs.SGE{{Addr: memAddr(p.memA), Length: 8, LKey: 0xbad}}},
		uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{sge(p.memA, 0, 8, keyA)}})
	wc := poll(t, p.a.r.scq, 2)
	require.Equal(t, uverbs.WC{WRID: 1, Status: uverbs.WCLocProtErr, VendorErr: 0x42, QPN: p.a.qpn}, wc[0])
	require.Equal(t, uverbs.WC{WRID: 2, Status: uverbs.WCWRFlushErr, VendorErr: 0x42, QPN: p.a.qpn}, wc[1])
	wc = poll(t, p.a.r.rcq, 1)
	require.Equal(t, uverbs.WC{WRID: 500, Status: uverbs.WCWRFlushErr, VendorErr: 0x42, QPN: p.a.qpn}, wc[0])

	q := newPair(t, uverbs.QPTypeRC, 8, 8, 16)
	q.post(t, q.a, uverbs.SendWR{WRID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, RemoteAddr: memAddr(q.memB), RKey: 0xbad,
		SGL: []uverbs.SGE{sge(q.memA, 0, 8, keyA)}})
	require.Equal(t, uverbs.WCRemAccessErr, poll(t, q.a.r.scq, 1)[0].Status)

	r := newPair(t, uverbs.QPTypeRC, 8, 8, 16)
	r.post(t, r.a, uverbs.SendWR{WRID: 4, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{sge(r.memA, 0, 8, keyA)}})
	wc = poll(t, r.a.r.scq, 1)
	require.Equal(t, uint64(4), wc[0].WRID)
	require.Equal(t, uverbs.WCRNRRetryExcErr, wc[0].Status)
}

// The SQ refuses at libmlx5's limit, and accepts again once completions
// retire WQEs.
func TestModelSQFull(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 4, 4, 64)
	limit := int(p.a.r.lay.cap.MaxSendWR)
	wrs := make([]uverbs.SendWR, limit+3)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: memAddr(p.memB), RKey: keyB,
			SGL: []uverbs.SGE{sge(p.memA, 0, 8, keyA)}}
	}
	n, err := p.a.r.sq.post(wrs)
	require.ErrorIs(t, err, ErrQueueFull)
	require.Equal(t, limit, n)
	require.NoError(t, p.dev.ring(p.a))
	require.Len(t, poll(t, p.a.r.scq, limit), limit)
	n, err = p.a.r.sq.post(wrs[:limit])
	require.NoError(t, err)
	require.Equal(t, limit, n)
}

// More completions than CQ entries without polling: the model flags the
// overrun (the HCA would raise a CQ error) and the provider never reads a
// CQE twice.
func TestModelCQOverrun(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 16, 16, 4)
	for i := 0; i < 6; i++ {
		p.post(t, p.a, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB), RKey: keyB, SGL: []uverbs.SGE{sge(p.memA, 0, 8, keyA)}})
	}
	require.True(t, p.dev.cqs[p.a.r.scq].overrun)
	wc := poll(t, p.a.r.scq, 4)
	for i := range wc {
		require.Equal(t, uint64(i), wc[i].WRID)
	}
	poll(t, p.a.r.scq, 0)
}

// A compressed CQE (format 3) is refused with ErrCQECompression and not
// consumed; a CQE naming an unknown user index is an error, not a panic.
func TestPollRefusesCompressedAndUnknown(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 4, 4, 8)
	c := p.a.r.scq
	cqe := c.cqe(0)
	put32(cqe, offSopDropQP, uint32(opSend)<<24|p.a.qpn)
	*(*uint8)(unsafeAdd(cqe, offOpOwn)) = cqeReq<<4 | cqeCompressed
	wc := make([]uverbs.WC, 2)
	n, err := c.poll(wc)
	require.ErrorIs(t, err, ErrCQECompression)
	require.Equal(t, 0, n)
	require.Equal(t, uint32(0), c.consIndex, "not consumed")

	*(*uint8)(unsafeAdd(cqe, offOpOwn)) = cqeReq << 4
	put32(cqe, offSrqnUidx, 77)
	n, err = c.poll(wc)
	require.Error(t, err)
	require.Contains(t, err.Error(), "user index 0x4d")
	require.Equal(t, 0, n)
}
