package mlx5

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ibgo/ibgo/uverbs"
)

// devModel is a test-only model of a ConnectX HCA: after a doorbell it reads
// the WQEs the provider wrote, executes them between QPs of the same model
// (send/recv, RDMA write/read, atomics, UD), checks keys, and writes CQE64s
// the provider then polls. It is deliberately simple: one port, no
// packets, no retries; a missing receive WQE is an RNR error.
type devModel struct {
	mrs map[uint32][]byte // lkey/rkey -> memory (tests use lkey == rkey)
	qps map[uint32]*devQP // qpn -> QP
	cqs map[*cqRing]*devCQ
	now uint64 // the modelled HCA clock: written into each CQE, then advanced
	ib  bool   // an InfiniBand port: a UD datagram has a GRH only if its AV asks
	grh bool   // the datagram being executed carries a GRH
}

type devQP struct {
	r       *rig
	qpn     uint32
	uidx    uint32
	peer    uint32 // connected QP (RC/UC)
	sqHW    uint32 // WQEBBs consumed
	rqHW    uint32 // receive WQEs consumed
	err     bool   // the QP moved to the error state
	srq     *srqQueue
	srqHW   uint32
	srqNext uint32 // next SRQ WQE index the device takes (the list head)
}

type devCQ struct {
	pi      uint32
	overrun bool
}

const (
	syndLocalLen    = 0x01
	syndLocalProt   = 0x04
	syndWRFlush     = 0x05
	syndRemoteAcc   = 0x13
	syndRNRRetryExc = 0x16
)

func newDevModel() *devModel {
	return &devModel{mrs: map[uint32][]byte{}, qps: map[uint32]*devQP{}, cqs: map[*cqRing]*devCQ{}}
}

func (d *devModel) reg(key uint32, b []byte) { d.mrs[key] = b }

func (d *devModel) addQP(r *rig, uidx uint32) *devQP {
	q := &devQP{r: r, qpn: r.sq.qpn, uidx: uidx}
	d.qps[q.qpn] = q
	return q
}

// mem resolves [addr, addr+n) in the region of key.
func (d *devModel) mem(key uint32, addr uint64, n uint32) ([]byte, bool) {
	b, ok := d.mrs[key]
	if !ok {
		return nil, false
	}
	base := memAddr(b)
	if addr < base || addr+uint64(n) > base+uint64(len(b)) {
		return nil, false
	}
	return b[addr-base : addr-base+uint64(n)], true
}

func be32At(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }

// writeCQE appends a CQE to cq the way the HCA does: fields first, op_own
// (with the owner bit of this pass) last.
func (d *devModel) writeCQE(c *cqRing, fill func(p unsafe.Pointer)) {
	dc := d.cqs[c]
	if dc == nil {
		dc = &devCQ{}
		d.cqs[c] = dc
	}
	ci := be32(c.dbrec[cqSetCI]) & 0xffffff
	if dc.pi-ci >= c.ncqe {
		dc.overrun = true // the HCA raises a CQ error event and drops the CQE
		return
	}
	// The CQE is built aside and op_own stored last, so that a poller
	// running meanwhile never sees a half-written CQE in this pass's
	// ownership (zeroing the slot in place would show it opcode 0, owner 0).
	var cqe [64]byte
	tmp := unsafe.Pointer(&cqe)
	// Success CQEs carry the completion time at 48; an error CQE's fill
	// overwrites those bytes with its syndromes, as in mlx5_err_cqe.
	d.now += 1000
	*(*uint64)(unsafe.Add(tmp, offTimestamp)) = be64(d.now)
	fill(tmp)
	owner := uint8(0)
	if dc.pi&c.ncqe != 0 {
		owner = 1
	}
	p := c.cqe(dc.pi)
	copy((*[64]byte)(p)[:offOpOwn], cqe[:offOpOwn])
	(*atomic.Uint32)(unsafe.Add(p, 60)).Store(*(*uint32)(unsafe.Add(tmp, 60))&^(0xff<<24) | uint32(cqe[offOpOwn]&0xf0|owner)<<24)
	dc.pi++
}

func (d *devModel) reqCQE(q *devQP, op uint8, ctr uint32, byteCnt uint32) {
	d.writeCQE(q.r.scq, func(p unsafe.Pointer) {
		put32(p, offSrqnUidx, q.uidx)
		put32(p, offByteCnt, byteCnt)
		put32(p, offSopDropQP, uint32(op)<<24|q.qpn)
		*(*uint16)(unsafe.Add(p, offWQECtr)) = be16(uint16(ctr))
		*(*uint8)(unsafe.Add(p, offOpOwn)) = cqeReq << 4
	})
}

func (d *devModel) errCQE(c *cqRing, opcode uint8, uidx, qpn uint32, ctr uint32, synd uint8, req bool, wqeOp uint8) {
	d.writeCQE(c, func(p unsafe.Pointer) {
		put32(p, offSrqnUidx, uidx)
		*(*uint8)(unsafe.Add(p, offSyndrome)) = synd
		*(*uint8)(unsafe.Add(p, offVendorErr)) = 0x42
		put32(p, offSopDropQP, uint32(wqeOp)<<24|qpn)
		*(*uint16)(unsafe.Add(p, offWQECtr)) = be16(uint16(ctr))
		*(*uint8)(unsafe.Add(p, offOpOwn)) = opcode << 4
	})
}

// wqeBytes copies the WQE at WQEBB index idx, following the ring wrap.
func (q *devQP) wqeBytes(idx uint32) []byte {
	sq := q.r.sqBytes()[:q.r.lay.sqWQECnt*64]
	first := sq[int(idx&(q.r.lay.sqWQECnt-1))*64:]
	ds := int(first[7] & 0x3f)
	out := make([]byte, ds*16)
	off := int(idx&(q.r.lay.sqWQECnt-1)) * 64
	for i := range out {
		out[i] = sq[(off+i)%len(sq)]
	}
	return out
}

// gather reads the payload of a WQE's data or inline segments.
func (d *devModel) gather(segs []byte) ([]byte, bool) {
	if len(segs) >= 4 && be32At(segs, 0)&inlineSegFlag != 0 {
		n := be32At(segs, 0) &^ inlineSegFlag
		return append([]byte(nil), segs[4:4+n]...), true
	}
	var out []byte
	for o := 0; o+16 <= len(segs); o += 16 {
		n, key, addr := be32At(segs, o), be32At(segs, o+4), binary.BigEndian.Uint64(segs[o+8:])
		m, ok := d.mem(key, addr, n)
		if !ok {
			return nil, false
		}
		out = append(out, m...)
	}
	return out, true
}

// scatter writes data into receive data segments (ending at MLX5_INVALID_LKEY).
func (d *devModel) scatter(segs []byte, data []byte) uint8 {
	for o := 0; o+16 <= len(segs) && len(data) > 0; o += 16 {
		n, key, addr := be32At(segs, o), be32At(segs, o+4), binary.BigEndian.Uint64(segs[o+8:])
		if key == invalidLKey {
			break
		}
		k := min(int(n), len(data))
		m, ok := d.mem(key, addr, uint32(k))
		if !ok {
			return syndLocalProt
		}
		copy(m, data[:k])
		data = data[k:]
	}
	if len(data) > 0 {
		return syndLocalLen
	}
	return 0
}

// takeRecv consumes the target's next receive WQE (own RQ or SRQ) and
// returns its data segments and the wqe_counter to report.
func (d *devModel) takeRecv(t *devQP) (segs []byte, ctr uint32, ok bool) {
	if t.srq != nil {
		if uint16(t.srqHW) == uint16(be32(*t.srq.dbrec)) { // the record's counter is 16 bits
			return nil, 0, false
		}
		idx := t.srqNext
		w := unsafe.Slice((*byte)(t.srq.wqe(idx)), 1<<t.srq.shift)
		t.srqNext = uint32(binary.BigEndian.Uint16(w[2:]))
		t.srqHW++
		return w[srqNextSegSize:], idx, true
	}
	head := be32(t.r.qpDB[rcvDBR]) & 0xffff
	if uint16(t.rqHW) == uint16(head) {
		return nil, 0, false
	}
	w := unsafe.Slice((*byte)(t.r.rq.wqe(t.rqHW)), 1<<t.r.rq.shift)
	ctr = t.rqHW
	t.rqHW++
	return w, ctr, true
}

// ring processes every WQE the SND doorbell record announces.
func (d *devModel) ring(q *devQP) error {
	pi := be32(q.r.qpDB[sndDBR]) & 0xffff
	for uint16(q.sqHW) != uint16(pi) {
		w := q.wqeBytes(q.sqHW)
		ctr := q.sqHW
		op := w[3]
		fm := w[11]
		ds := int(w[7] & 0x3f)
		q.sqHW += uint32(ds*16+63) / 64
		if q.err {
			d.errCQE(q.r.scq, cqeReqErr, q.uidx, q.qpn, ctr, syndWRFlush, true, op)
			continue
		}
		synd, byteCnt := d.exec(q, w, op)
		if synd != 0 {
			d.errCQE(q.r.scq, cqeReqErr, q.uidx, q.qpn, ctr, synd, true, op)
			d.toError(q)
			continue
		}
		if fm&ctrlCQUpdate != 0 {
			d.reqCQE(q, op, ctr, byteCnt)
		}
	}
	return nil
}

// toError moves a QP to the error state: its posted receives are flushed.
func (d *devModel) toError(q *devQP) {
	q.err = true
	for {
		_, ctr, ok := d.takeRecv(q)
		if !ok {
			return
		}
		d.errCQE(q.r.rcq, cqeRespErr, q.uidx, q.qpn, ctr, syndWRFlush, false, 0)
	}
}

// exec runs one WQE and returns an error syndrome (0 = success) and the
// requester byte count.
func (d *devModel) exec(q *devQP, w []byte, op uint8) (uint8, uint32) {
	segs := w[ctrlSegSize:]
	imm := be32At(w, 12)
	var target *devQP
	if q.r.sq.qpType == uverbs.QPTypeUD {
		dqp := be32At(segs, 8) &^ extendedUDAV
		target = d.qps[dqp]
		// RoCE always carries a GRH; on IB the AV's grh bit decides.
		d.grh = !d.ib || be32At(segs, 28)>>30&1 == 1
		segs = segs[datagramSegSize:]
	} else {
		target = d.qps[q.peer]
	}
	if target == nil {
		return syndRemoteAcc, 0
	}
	switch op {
	case opSend, opSendImm:
		data, ok := d.gather(segs)
		if !ok {
			return syndLocalProt, 0
		}
		rsegs, rctr, ok := d.takeRecv(target)
		if !ok {
			return syndRNRRetryExc, 0
		}
		if s := d.scatter(rsegs, data); s != 0 {
			d.errCQE(target.r.rcq, cqeRespErr, target.uidx, target.qpn, rctr, s, false, 0)
			d.toError(target)
			return syndRemoteAcc, 0
		}
		d.respCQE(q, target, op == opSendImm, cqeRespSend, imm, uint32(len(data)), rctr)
	case opRDMAWrite, opRDMAWriteImm:
		raddr, rkey := binary.BigEndian.Uint64(segs), be32At(segs, 8)
		data, ok := d.gather(segs[raddrSegSize:])
		if !ok {
			return syndLocalProt, 0
		}
		m, ok := d.mem(rkey, raddr, uint32(len(data)))
		if !ok {
			return syndRemoteAcc, 0
		}
		copy(m, data)
		if op == opRDMAWriteImm {
			_, rctr, ok := d.takeRecv(target)
			if !ok {
				return syndRNRRetryExc, 0
			}
			d.respCQE(q, target, true, cqeRespWrImm, imm, uint32(len(data)), rctr)
		}
	case opRDMARead:
		raddr, rkey := binary.BigEndian.Uint64(segs), be32At(segs, 8)
		local := segs[raddrSegSize:]
		total := uint32(0)
		for o := 0; o+16 <= len(local); o += 16 {
			total += be32At(local, o)
		}
		src, ok := d.mem(rkey, raddr, total)
		if !ok {
			return syndRemoteAcc, 0
		}
		if s := d.scatter(local, append([]byte(nil), src...)); s != 0 {
			return s, 0
		}
		return 0, total
	case opAtomicCS, opAtomicFA:
		raddr, rkey := binary.BigEndian.Uint64(segs), be32At(segs, 8)
		swapAdd, cmp := binary.BigEndian.Uint64(segs[16:]), binary.BigEndian.Uint64(segs[24:])
		m, ok := d.mem(rkey, raddr, 8)
		if !ok || raddr&7 != 0 {
			return syndRemoteAcc, 0
		}
		old := binary.BigEndian.Uint64(m) // atomics operate on big-endian (network order) values
		if op == opAtomicCS {
			if old == cmp {
				binary.BigEndian.PutUint64(m, swapAdd)
			}
		} else {
			binary.BigEndian.PutUint64(m, old+swapAdd)
		}
		var ret [8]byte
		binary.BigEndian.PutUint64(ret[:], old)
		if s := d.scatter(segs[32:], ret[:]); s != 0 {
			return s, 0
		}
		return 0, 8
	default:
		return syndRemoteAcc, 0
	}
	return 0, 0
}

func (d *devModel) respCQE(src, t *devQP, withImm bool, op uint8, imm, n, rctr uint32) {
	if withImm && op == cqeRespSend {
		op = cqeRespSendImm
	}
	d.writeCQE(t.r.rcq, func(p unsafe.Pointer) {
		put32(p, offSrqnUidx, t.uidx)
		put32(p, offByteCnt, n)
		put32(p, offImmInval, imm)
		fr := src.qpn
		if t.r.sq.qpType == uverbs.QPTypeUD && d.grh {
			fr |= 1 << 28 // GRH present
		}
		put32(p, offFlagsRQPN, fr)
		put32(p, offSopDropQP, t.qpn)
		*(*uint16)(unsafe.Add(p, offWQECtr)) = be16(uint16(rctr))
		*(*uint8)(unsafe.Add(p, offOpOwn)) = op << 4
	})
}

func (q *devQP) String() string { return fmt.Sprintf("qp %#x", q.qpn) }
