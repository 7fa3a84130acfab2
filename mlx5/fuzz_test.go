package mlx5

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// FuzzCQEParse: what the device writes into a CQ is trusted only as far
// as the PRM says. Any CQE content (opcode, syndrome, format, user index,
// WQE counter, byte count, flags), written with the owner bit of its pass
// as the HCA does, must come back from poll as a completion or an error:
// never a panic, never a read outside the queues, never a consumer index
// that does not move. A QP with posted sends and receives gives the CQEs
// something to name (issue 30).
func FuzzCQEParse(f *testing.F) {
	seed := func(op, synd uint8, ctr uint16, uidx uint32, fmtBits uint8) []byte {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b[offSrqnUidx:], uidx)
		binary.BigEndian.PutUint32(b[offByteCnt:], 64)
		binary.BigEndian.PutUint32(b[offSopDropQP:], 0x1a0)
		binary.BigEndian.PutUint16(b[offWQECtr:], ctr)
		b[offSyndrome] = synd
		b[offOpOwn] = op<<4 | fmtBits
		return b
	}
	f.Add(seed(cqeReq, 0, 0, 0, 0))
	f.Add(append(seed(cqeRespSend, 0, 0, 0, 0), seed(cqeReq, 0, 1, 0, 0)...))
	f.Add(seed(cqeReqErr, 0x05, 2, 0, 0))
	f.Add(seed(cqeRespErr, 0x22, 0, 0, 0))
	f.Add(seed(cqeRespSendImm, 0, 7, 3, 0))
	f.Add(seed(cqeReq, 0, 0, 0, cqeCompressed))
	f.Fuzz(func(t *testing.T, cqes []byte) {
		q := vQP{Type: num(uverbs.QPTypeRC), QPN: 0x1a0, BfregIndex: 24,
			Requested: vCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}
		r := newRig(t, q, vCQ{CQN: 0x400, CQECnt: 16}, vCQ{CQN: 0x401, CQECnt: 16})
		m := make([]byte, 256)
		r.sq.local, r.rq.local = regLocal(m), regLocal(m)
		sge := []uverbs.SGE{{Addr: memAddr(m), Length: 64, LKey: 1}}
		for i := range 4 {
			_, err := r.sq.post([]uverbs.SendWR{{WRID: uint64(100 + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: sge}})
			require.NoError(t, err)
			_, err = r.rq.post([]uverbs.RecvWR{{WRID: uint64(200 + i), SGL: sge}})
			require.NoError(t, err)
		}
		d := newDevModel()
		for c, ring := range []*cqRing{r.scq, r.rcq} {
			for i := 0; i+64 <= len(cqes) && i < 64*int(ring.ncqe); i += 64 {
				if (i/64)%2 != c {
					continue // alternate CQEs between the two CQs
				}
				b := cqes[i : i+64]
				d.writeCQE(ring, func(p unsafe.Pointer) { copy((*[64]byte)(p)[:], b) })
			}
			wc := make([]uverbs.WC, 4)
			for round := 0; round < 2*int(ring.ncqe)+2; round++ {
				before := ring.consIndex
				n, err := ring.poll(wc)
				require.LessOrEqual(t, n, len(wc))
				for _, w := range wc[:n] {
					require.Less(t, int(w.Status), 32, "a status the verbs define")
				}
				if err != nil || n == 0 {
					break
				}
				require.Greater(t, ring.consIndex, before, "poll moved on")
			}
		}
	})
}

// FuzzPostList: the WQE builder's invariants for any post list: however
// the WRs are made (opcodes, flags, SGE counts and lengths, inline data of
// any size, unknown AHs), post writes only inside the send ring, reports
// how many WRs it posted, and rings the doorbell with the last WQE it
// built whole: the doorbell record counts exactly the WQE basic blocks of
// the posted WRs and the BlueFlame/doorbell copy names the last one's
// index and the QP (issue 30, item 1).
func FuzzPostList(f *testing.F) {
	f.Add([]byte{0, 0x10, 16, 1, 0, 0x12, 200, 1})
	f.Add([]byte{3, 0x02, 8, 2, 4, 0x00, 64, 1, 0, 0x10, 1, 0})
	f.Add([]byte{9, 0, 0, 0})
	f.Fuzz(func(t *testing.T, spec []byte) {
		q := vQP{Type: num(uverbs.QPTypeRC), QPN: 0x1a7, BfregIndex: 24,
			Requested: vCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64}}
		r := newRig(t, q, vCQ{CQN: 0x400, CQECnt: 64}, vCQ{CQN: 0x401, CQECnt: 64})
		m := make([]byte, 512)
		for i := range m {
			m[i] = byte(i)
		}
		r.sq.local = regLocal(m)
		ops := []uverbs.WROpcode{uverbs.WRSend, uverbs.WRSendWithImm, uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm,
			uverbs.WRRDMARead, uverbs.WRAtomicCmpAndSwp, uverbs.WRAtomicFetchAndAdd, uverbs.WROpcode(13)}
		var wrs []uverbs.SendWR
		for i := 0; i+4 <= len(spec) && len(wrs) < 24; i += 4 {
			op, flags, n, nsge := spec[i], spec[i+1], int(spec[i+2]), int(spec[i+3]%4)
			wr := uverbs.SendWR{WRID: uint64(len(wrs)), Opcode: ops[op%byte(len(ops))], RemoteAddr: 0x1000, RKey: 7}
			if flags&0x01 != 0 {
				wr.Flags |= uverbs.SendSignaled
			}
			if flags&0x02 != 0 {
				wr.Flags |= uverbs.SendFence
			}
			if flags&0x10 != 0 {
				wr.Flags |= uverbs.SendInline
			}
			if flags&0x20 != 0 {
				wr.InlineData = m[:min(n, len(m))]
			}
			for k := range nsge {
				off := (k * 97) % 256
				l := min(n, len(m)-off)
				wr.SGL = append(wr.SGL, uverbs.SGE{Addr: memAddr(m[off:]), Length: uint32(l), LKey: 1})
			}
			wrs = append(wrs, wr)
		}
		ringBytes := unsafe.Slice((*byte)(r.sq.buf), int(r.sq.wqeCnt)*sendWQEBB)
		guard := append([]byte(nil), r.qpBuf...)
		cur, dbBefore, off := r.sq.curPost, r.sq.dbrec[sndDBR], r.sq.bf.offset
		n, err := r.sq.post(wrs)
		require.LessOrEqual(t, n, len(wrs))
		if n < len(wrs) {
			require.Error(t, err, "a WR not posted is an error")
		}
		// nothing outside the send ring changed
		sqStart := int(uintptr(r.sq.buf) - uintptr(unsafe.Pointer(&r.qpBuf[0])))
		for i := range r.qpBuf {
			if i >= sqStart && i < sqStart+len(ringBytes) {
				continue
			}
			require.Equal(t, guard[i], r.qpBuf[i], "byte %d outside the send ring", i)
		}
		if n == 0 {
			require.Equal(t, dbBefore, r.sq.dbrec[sndDBR], "no doorbell without a WQE")
			require.Equal(t, cur, r.sq.curPost)
			return
		}
		require.Equal(t, be32(r.sq.curPost&0xffff), r.sq.dbrec[sndDBR], "the record counts the posted WQEs")
		db := *(*uint64)(unsafe.Add(r.sq.bf.reg, off))
		hdr := be64(db)
		require.Equal(t, uint32(q.QPN), uint32(hdr)>>8&0xffffff, "the doorbell names the QP")
		// the last posted WQE begins where the one before the end of the
		// posted ones began: walk them by their DS counts
		p := cur
		var last uint32
		for range n {
			last = p
			w := unsafe.Add(r.sq.buf, uintptr(p&(r.sq.wqeCnt-1))<<sendWQEBBSh)
			ds := be64(*(*uint64)(w)) & 0x3f
			p += uint32((ds*16 + sendWQEBB - 1) / sendWQEBB)
		}
		require.Equal(t, r.sq.curPost, p, "the WQEs' sizes add up to what was posted")
		require.Equal(t, last&0xffff, uint32(hdr>>40)&0xffff, "the doorbell names the last WQE posted")
	})
}
