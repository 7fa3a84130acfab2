package perftest

import (
	"github.com/ibgo/ibgo/uverbs"
)

// wrSet is each QP's post list of send work requests for one size
// (perftest: ctx_set_send_wqes), with what advancing the addresses needs.
type wrSet struct {
	wrs   [][]uverbs.SendWR
	sges  [][]uverbs.SGE
	local []uint64 // each QP's first local address
	rem   []uint64 // each QP's first remote address
	// Single-WR posts of at most half a page cycle through the page in
	// cache-line-aligned slots (perftest: increase_loc_addr); step is 0
	// when they do not.
	step  uint64
	slots uint64   // slots in the window
	slot  []uint64 // each QP's current slot
}

// sendList is one QP's post list (ctx_set_send_wqes for one QP): postList
// WRs, each a slot further into the page when small messages are listed,
// every cq_mod-th signalled. wr_id is the QP's index.
type sendList struct {
	qp       int
	op       uverbs.WROpcode
	flags    uverbs.SendFlags
	size     int
	postList int
	cqMod    int  // with a list, every cqMod-th WR is signalled
	step     int  // cache-line-rounded size
	cycle    bool // size <= page/2: list entries take successive slots
	pageSize int
	base     uint64 // local address
	rbase    uint64 // remote address
	lkey     uint32
	rkey     uint32
	atomic   bool
	ah       *uverbs.AH // UD
	rqpn     uint32
	rqkey    uint32
}

func (l sendList) build() ([]uverbs.SendWR, []uverbs.SGE) {
	wrs := make([]uverbs.SendWR, l.postList)
	sges := make([]uverbs.SGE, l.postList)
	mod := l.cqMod
	if mod < 1 {
		mod = l.postList // perftest's default with a list
	}
	for j := range wrs {
		off := uint64(0)
		if l.cycle && l.postList > 1 {
			off = uint64(j*l.step) % uint64(l.pageSize)
		}
		sges[j] = uverbs.SGE{Addr: l.base + off, Length: uint32(l.size), LKey: l.lkey}
		wrs[j] = uverbs.SendWR{WRID: uint64(l.qp), Opcode: l.op, Flags: l.flags, SGL: sges[j : j+1],
			RemoteAddr: l.rbase + off, RKey: l.rkey}
		if l.atomic {
			wrs[j].CompareAdd, wrs[j].Swap = 1, 0 // ATOMIC_ADD_VALUE, ATOMIC_SWAP_VALUE
		}
		if l.ah != nil {
			wrs[j].AH, wrs[j].RemoteQPN, wrs[j].RemoteQKey = l.ah, l.rqpn, l.rqkey
		}
		// ctx_set_send_reg_wqes signals every WR with (j+1)%cq_mod == 0:
		// each completion then stands for cq_mod WRs, as sendDone counts.
		// A single WR keeps its flag; fillSQ moderates it per post.
		if l.postList > 1 && (j+1)%mod != 0 {
			wrs[j].Flags &^= uverbs.SendSignaled
		}
	}
	return wrs, sges
}

func (e *engine) sendWRs(size int) *wrSet {
	c := e.cfg
	s := &wrSet{}
	op := map[Verb]uverbs.WROpcode{Send: uverbs.WRSend, Write: uverbs.WRRDMAWrite, Read: uverbs.WRRDMARead}[c.Test.Verb]
	if c.Test.Verb == Atomic {
		op = uverbs.WRAtomicFetchAndAdd
		if c.AtomicCAS {
			op = uverbs.WRAtomicCmpAndSwp
		}
	}
	flags := uverbs.SendSignaled
	if size <= c.Inline && c.Test.Verb != Read && c.Test.Verb != Atomic {
		flags |= uverbs.SendInline
	}
	step := inc(size, e.hw.cacheLine)
	cycle := size <= e.hw.pageSize/2
	for i := range e.res.qps {
		l := sendList{qp: i, op: op, flags: flags, size: size, postList: c.PostList, cqMod: c.CQMod, step: step, cycle: cycle,
			pageSize: e.hw.pageSize, base: e.res.mr.Addr() + uint64(i*e.res.bufSize), rbase: e.sess.remote[i].VAddr,
			lkey: e.res.mr.LKey(), rkey: e.sess.remote[i].RKey, atomic: c.Test.Verb == Atomic}
		if c.Conn == UD {
			l.ah, l.rqpn, l.rqkey = e.res.ahs[i], e.sess.remote[i].QPN, defQKey
			if i < len(e.res.cmq.peers) { // -R: the SIDR answer's
				l.rqpn, l.rqkey = e.res.cmq.peers[i].QPN, e.res.cmq.peers[i].QKey
			}
		}
		wrs, sges := l.build()
		s.wrs, s.sges = append(s.wrs, wrs), append(s.sges, sges)
		s.local, s.rem = append(s.local, l.base), append(s.rem, l.rbase)
	}
	if c.PostList == 1 && cycle {
		s.step, s.slots = uint64(step), uint64(e.hw.pageSize/step)
		s.slot = make([]uint64, len(e.res.qps))
	}
	return s
}

// advance moves QP i's single-WR post to the next slot of the page-sized
// window, back to the start after the last (increase_loc_addr,
// increase_rem_addr): a counter and an add, no division per post.
func (s *wrSet) advance(i int) {
	if s.step == 0 {
		return
	}
	wr := &s.wrs[i][0]
	sge := &s.sges[i][0]
	s.slot[i]++
	if s.slot[i] == s.slots {
		s.slot[i] = 0
		sge.Addr, wr.RemoteAddr = s.local[i], s.rem[i]
		return
	}
	sge.Addr += s.step
	wr.RemoteAddr += s.step
}

// recvSet is the receive side of the send tests (ctx_set_recv_wqes): one
// receive WR per QP, into that QP's receive region, whose wr_id is the QP's
// index. With an SRQ every QP's WR goes to the SRQ, and the wr_id says
// whose share a completion belongs to, so each share is reposted until it
// has carried its QP's iterations (perftest does the same).
type recvSet struct {
	to     []recvPoster // where share i is posted: its QP, or the SRQ
	wrs    [][]uverbs.RecvWR
	sges   [][]uverbs.SGE
	posted []uint64 // receives posted per share so far
	limit  uint64   // per share; 0: no limit (duration mode)
}

func newRecvSet(nq, perQP int, base func(i int) uint64, length, lkey uint32, limit uint64) recvSet {
	rs := recvSet{posted: make([]uint64, nq), limit: limit}
	for i := 0; i < nq; i++ {
		sge := []uverbs.SGE{{Addr: base(i), Length: length, LKey: lkey}}
		rs.wrs = append(rs.wrs, []uverbs.RecvWR{{WRID: uint64(i), SGL: sge}})
		rs.sges = append(rs.sges, sge)
		rs.posted[i] = uint64(perQP)
	}
	return rs
}

// recvPoster is what receives are posted to (a QP or the SRQ).
type recvPoster interface {
	PostRecv(wr []uverbs.RecvWR) (int, error)
}

// repostDue says whether share i's receive goes back after a completion.
func (r *recvSet) repostDue(i int) bool { return r.limit == 0 || r.posted[i] < r.limit }

// postRecvs posts each QP's first receives (rx_depth each, or its share of
// rx_depth on the SRQ).
func (e *engine) postRecvs(size int) error {
	c := e.cfg
	ln := size
	if c.Conn == UD {
		ln += 40
	}
	limit := uint64(c.Iters)
	if c.Duration != 0 {
		limit = 0
	}
	perQP := e.rxPerQP()
	mr := e.res.mr
	base := func(i int) uint64 { return mr.Addr() + uint64((c.NumQPs+i)*e.res.bufSize) }
	e.res.recvs = newRecvSet(len(e.res.qps), perQP, base, uint32(ln), mr.LKey(), limit)
	for i := range e.res.qps {
		if e.res.srq != nil {
			e.res.recvs.to = append(e.res.recvs.to, e.res.srq)
		} else {
			e.res.recvs.to = append(e.res.recvs.to, e.res.qps[i])
		}
	}
	for i := range e.res.qps {
		for k := 0; k < perQP; k++ {
			if err := e.postRecv(i); err != nil {
				return &Error{Kind: KindPost, op: opPostRecv, QP: i, Done: uint64(k), Err: err}
			}
		}
	}
	return nil
}

// postRecv posts QP i's receive WR (to the SRQ when there is one).
func (e *engine) postRecv(i int) error {
	_, err := e.res.recvs.to[i].PostRecv(e.res.recvs.wrs[i])
	return err
}

// recvDone accounts the receive completion of share qi and reposts it
// when due.
func (e *engine) recvDone(qi int, rcnt uint64) error {
	r := &e.res.recvs
	if !r.repostDue(qi) {
		return nil
	}
	if err := e.postRecv(qi); err != nil {
		return &Error{Kind: KindPost, op: opPostRecv, QP: qi, Done: rcnt, Err: err}
	}
	r.posted[qi]++
	return nil
}

// qpIndex checks a completion's wr_id, which ibgo set to a QP index.
func qpIndex(w *uverbs.WC, nq int, side string, sent, done uint64) (int, error) {
	if w.WRID >= uint64(nq) {
		return 0, &Error{Kind: KindCompletion, op: opCompletion, Side: side, WC: *w, Sent: sent, Done: done,
			Text: "wr_id is not a QP index of this test"}
	}
	return int(w.WRID), nil
}
