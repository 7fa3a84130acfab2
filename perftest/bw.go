package perftest

import (
	"github.com/ibgo/ibgo/uverbs"
)

// The bandwidth loops (perftest_resources.c: run_iter_bw,
// run_iter_bw_server, run_iter_bi, perform_warm_up). Per message they post,
// poll, count for the pacer and, without -N, read the clock; nothing else:
// no allocation, no lock. The one interface call is the post (sendPoster),
// so that a test can time the loop over a fake QP; the QP's own PostSend
// makes another to its provider anyway.

// pollBatch is how many completions one poll takes (CTX_POLL_BATCH).
const pollBatch = 16

func (e *engine) resetTimes(n int) {
	if e.cfg.NoPeak {
		e.meas.tposted, e.meas.tcompleted = make([]int64, 1), make([]int64, 1)
	} else {
		e.meas.tposted, e.meas.tcompleted = make([]int64, n), make([]int64, n)
	}
	e.meas.iters = 0
}

// sendSide is the requester's state in the bandwidth loops.
type sendSide struct {
	s          *wrSet
	qps        []sendPoster
	scnt, ccnt []uint64 // per QP: posted and completed
	totS, totC uint64
	tot        uint64 // iterations × QPs (iterations mode)
	iters      uint64
	cqMod      uint64
	postList   uint64
	txDepth    uint64
	durMode    bool
	peak       bool // stamp every post and completion
}

func (e *engine) newSendSide(size int) *sendSide {
	c := e.cfg
	nq := len(e.res.qps)
	return &sendSide{s: e.sendWRs(size), qps: e.sendPosters(), scnt: make([]uint64, nq), ccnt: make([]uint64, nq),
		tot: uint64(c.Iters) * uint64(nq), iters: uint64(c.Iters), cqMod: uint64(c.CQMod),
		postList: uint64(c.PostList), txDepth: uint64(c.TxDepth), durMode: c.Duration != 0, peak: !c.NoPeak}
}

// windowReporter prints a --run_infinitely line every window.
type windowReporter struct {
	window, next, lastT int64
	lastIters           uint64
}

func (e *engine) newWindowReporter() windowReporter {
	w := windowReporter{window: int64(e.cfg.Duration) * 1e9}
	w.lastT = clk.now()
	w.next = w.lastT + w.window
	return w
}

func (e *engine) tick(w *windowReporter, size int) {
	if now := clk.now(); now >= w.next {
		e.reportWindow(size, e.meas.iters-w.lastIters, now-w.lastT)
		w.lastIters, w.lastT = e.meas.iters, now
		w.next += w.window
	}
}

// iterBW is the requester's loop (run_iter_bw): keep tx_depth work
// requests in flight per QP, ask for a completion every cq_mod of them,
// record post and completion times for the peak.
func (e *engine) iterBW(size int, mode runMode) error {
	infinite := mode == runForever
	ss := e.newSendSide(size)
	e.resetTimes(int(ss.tot))
	wc := make([]uverbs.WC, pollBatch)
	var dur *durationClock
	var win windowReporter
	if ss.durMode && !infinite {
		dur = e.startDuration()
		defer dur.stop()
	}
	if infinite {
		win = e.newWindowReporter()
	}
	if !ss.durMode && !ss.peak {
		e.meas.tposted[0] = clk.now()
	}
	nq := len(e.res.qps)
	cq := e.res.sendCQ
	events := e.res.channel != nil
	for ss.totS < ss.tot || ss.totC < ss.tot || ss.durMode && (infinite || !dur.ended()) {
		for i := 0; i < nq; i++ {
			if err := e.fillSQ(i, ss, dur); err != nil {
				return err
			}
		}
		if ss.totC < ss.tot || ss.durMode && ss.totC < ss.totS {
			n, err := cq.Poll(wc)
			if err != nil {
				return &Error{Kind: KindPoll, op: opPollSend, Err: err}
			}
			if n == 0 && events {
				if err := e.awaitEvent(ss.totC, ss.tot); err != nil {
					return err
				}
			} else if n == 0 && e.peerGone() {
				return e.goneErr()
			}
			for k := 0; k < n; k++ {
				if err := e.sendDone(&wc[k], ss); err != nil {
					return err
				}
				if infinite || dur.sampling() {
					e.meas.iters += ss.cqMod
				}
			}
		}
		if infinite {
			e.tick(&win, size)
		}
		e.pace.maybeYield()
	}
	if !ss.durMode && !ss.peak {
		e.meas.tcompleted[0] = clk.now()
	}
	return e.finishDuration(dur)
}

// fillSQ is run_iter_bw's inner loop for QP i: post while the QP has room
// in its TX depth, signalling every cq_mod-th work request and the last.
// Each post counts for the pacer first (before its stamp): one call can
// post tx_depth work requests, which under emulation takes longer than the
// runtime lets a goroutine run without passing through the scheduler.
func (e *engine) fillSQ(i int, ss *sendSide, dur *durationClock) error {
	wrs := ss.s.wrs[i]
	wr := &wrs[0]
	qp := ss.qps[i]
	cqMod, postList, iters := ss.cqMod, ss.postList, ss.iters
	moderate := postList == 1 && cqMod > 1
	units := postUnits(postList)
	for (ss.scnt[i] < iters || ss.durMode) && ss.scnt[i]-ss.ccnt[i]+postList <= ss.txDepth {
		e.pace.spend(units)
		scnt := ss.scnt[i]
		if moderate && scnt%cqMod == 0 && !(scnt == iters-1 && !ss.durMode) {
			wr.Flags &^= uverbs.SendSignaled
		}
		if ss.peak && ss.totS < uint64(len(e.meas.tposted)) {
			e.meas.tposted[ss.totS] = clk.now()
		}
		if dur.ended() {
			break
		}
		if n, err := qp.PostSend(wrs); err != nil || n != len(wrs) {
			return &Error{Kind: KindPost, op: opPostSend, QP: i, Sent: scnt, Err: err}
		}
		ss.s.advance(i)
		scnt += postList
		ss.scnt[i] = scnt
		ss.totS += postList
		if postList == 1 && (scnt%cqMod == cqMod-1 || (!ss.durMode && scnt == iters-1)) {
			wr.Flags |= uverbs.SendSignaled
		}
	}
	return nil
}

// sendDone accounts one send completion of the bandwidth loops: it stands
// for cq_mod work requests of its QP (wr_id), and stamps the completion time
// for the peak.
func (e *engine) sendDone(w *uverbs.WC, ss *sendSide) error {
	if w.Status != uverbs.WCSuccess {
		return compErr("client", w, ss.totS, ss.totC)
	}
	qi, err := qpIndex(w, len(ss.ccnt), "client", ss.totS, ss.totC)
	if err != nil {
		return err
	}
	ss.ccnt[qi] += ss.cqMod
	ss.totC += ss.cqMod
	if ss.peak {
		if j := min(ss.totC, ss.tot) - 1; j < uint64(len(e.meas.tcompleted)) {
			e.meas.tcompleted[j] = clk.now()
		}
	}
	return nil
}

// reportWindow prints one --run_infinitely line.
func (e *engine) reportWindow(size int, n uint64, ns int64) {
	factor := float64(mbFactor)
	if e.cfg.ReportGbits {
		factor = gbFactor
	}
	if ns <= 0 {
		ns = 1
	}
	r := bwReport{Size: uint64(size), Iters: n}
	r.Avg = float64(size) * float64(n) * nsPerSec / (float64(ns) * factor)
	r.MsgRate = float64(n) * nsPerSec / (float64(ns) * 1e6)
	e.printBW(r, nil)
}

// stallWatch notices a receiver that has had nothing for 60 s (perftest's
// "Did not get Message for 60 Seconds"). It shares the watchdog's spin
// counter: the clock is read once every watchEvery idle spins, not per spin.
type stallWatch struct {
	last  int64  // when progress was last seen
	count uint64 // the receive count then
}

func (s *stallWatch) stalled(e *engine, count uint64) bool {
	if e.sess.wd.spins%watchEvery != 0 {
		return false
	}
	now := clk.now()
	if count != s.count {
		s.count, s.last = count, now
		return false
	}
	return now-s.last > 60e9
}

// iterBWServer is the send_bw receiver (run_iter_bw_server): count receives,
// repost while more are due. A silent peer (lost UD/UC datagrams) ends the
// run after 60 seconds without progress, as perftest's check_alive does.
func (e *engine) iterBWServer(size int, mode runMode) error {
	c := e.cfg
	infinite := mode == runForever
	nq := len(e.res.qps)
	durMode := c.Duration != 0
	tot := uint64(c.Iters) * uint64(nq)
	e.resetTimes(1)
	var rcnt uint64
	wc := make([]uverbs.WC, pollBatch)
	first := true
	var dur *durationClock
	defer func() { dur.stop() }()
	stall := stallWatch{last: clk.now()}
	var win windowReporter
	cq := e.res.recvCQ
	events := e.res.channel != nil
	for rcnt < tot || durMode && (infinite || dur == nil || !dur.ended()) {
		n, err := cq.Poll(wc)
		if err != nil {
			return &Error{Kind: KindPoll, op: opPollRecv, Err: err}
		}
		if n == 0 && events {
			if err := e.awaitEvent(rcnt, tot); err != nil {
				return err
			}
			continue
		}
		if n == 0 {
			if e.peerGone() {
				return e.goneErr()
			}
			if !durMode && stall.stalled(e, rcnt) {
				e.pr.warnf(" Did not get Message for 60 Seconds, exiting..\n Total Received=%d, Total Iters Required=%d\n", rcnt, tot)
				break
			}
			if infinite && win.window != 0 {
				e.tick(&win, size)
			}
			e.pace.maybeYield()
			continue
		}
		if first {
			first = false
			switch {
			case infinite:
				win = e.newWindowReporter()
			case durMode:
				dur = e.startDuration()
			default:
				e.meas.tposted[0] = clk.now()
			}
		}
		for k := 0; k < n; k++ {
			w := &wc[k]
			if w.Status != uverbs.WCSuccess {
				return compErr("server", w, 0, rcnt)
			}
			qi, err := qpIndex(w, nq, "server", 0, rcnt)
			if err != nil {
				return err
			}
			rcnt++
			if infinite || dur.sampling() {
				e.meas.iters++
			}
			if err := e.recvDone(qi, rcnt); err != nil {
				return err
			}
		}
		e.pace.spend(uint32(n) * postCost)
	}
	if dur != nil {
		e.finishDuration(dur)
	} else {
		e.meas.tcompleted[0] = clk.now()
	}
	if !durMode {
		e.meas.iters = rcnt
	}
	return nil
}

// iterBi is the bidirectional send loop (run_iter_bi): send and receive at
// once; the server starts sending only after its first receive.
func (e *engine) iterBi(size int) error {
	c := e.cfg
	ss := e.newSendSide(size)
	e.resetTimes(int(ss.tot))
	nq := len(e.res.qps)
	var totR uint64
	wc := make([]uverbs.WC, pollBatch)
	before := c.Server == ""
	var dur *durationClock
	defer func() { dur.stop() }()
	if !before && ss.durMode {
		dur = e.startDuration()
	}
	if !ss.peak {
		e.meas.tposted[0] = clk.now()
	}
	stall := stallWatch{last: clk.now()}
	events := e.res.channel != nil
	for ss.durMode && (dur == nil || !dur.ended()) || ss.totC < ss.tot || totR < ss.tot {
		for i := 0; i < nq && !before; i++ {
			if err := e.fillSQ(i, ss, dur); err != nil {
				return err
			}
		}
		n, err := e.res.recvCQ.Poll(wc)
		if err != nil {
			return &Error{Kind: KindPoll, op: opPollRecv, Err: err}
		}
		if n > 0 && before {
			before = false
			if ss.durMode {
				dur = e.startDuration()
			}
		}
		for k := 0; k < n; k++ {
			w := &wc[k]
			if w.Status != uverbs.WCSuccess {
				return compErr("server", w, ss.totS, totR)
			}
			qi, err := qpIndex(w, nq, "server", ss.totS, totR)
			if err != nil {
				return err
			}
			totR++
			if dur.sampling() {
				e.meas.iters++
			}
			if err := e.recvDone(qi, totR); err != nil {
				return err
			}
		}
		sent := 0
		if ss.totC < ss.tot || ss.durMode && ss.totC < ss.totS {
			ns, err := e.res.sendCQ.Poll(wc)
			if err != nil {
				return &Error{Kind: KindPoll, op: opPollSend, Err: err}
			}
			for k := 0; k < ns; k++ {
				if err := e.sendDone(&wc[k], ss); err != nil {
					return err
				}
			}
			sent = ns
		}
		if n == 0 && sent == 0 && events {
			if err := e.awaitEvent(totR, ss.tot); err != nil {
				return err
			}
			continue
		}
		if n == 0 && e.peerGone() {
			return e.goneErr()
		}
		if n == 0 && !ss.durMode && stall.stalled(e, totR) {
			return &Error{Kind: KindStall, op: opStall, Done: totR, Value: int(ss.tot)}
		}
		e.pace.spend(1 + uint32(n)*postCost)
	}
	if !ss.peak && !ss.durMode {
		e.meas.tcompleted[0] = clk.now()
	}
	return e.finishDuration(dur)
}

// warmUpPosts is how many post calls perform_warm_up makes per QP: tx_depth
// single work requests, or one post list.
func warmUpPosts(c *Config) int {
	if c.PostList == 1 {
		return c.TxDepth
	}
	return 1
}

// signalled counts the work requests of a list that produce a completion.
func signalled(wrs []uverbs.SendWR) int {
	n := 0
	for i := range wrs {
		if wrs[i].Flags&uverbs.SendSignaled != 0 {
			n++
		}
	}
	return n
}

// warmUp mirrors perform_warm_up: per QP, post tx_depth single work
// requests (each signalled, as ctx_set_send_wqes left them) or one whole
// post list (its last signalled), then wait for exactly the completions
// those signalled requests produce.
func (e *engine) warmUp(size int) error {
	return e.warmUpWith(e.sendWRs(size), e.sendPosters(), e.res.sendCQ)
}

// sendPosters is the test's QPs as what the send loops post to.
func (e *engine) sendPosters() []sendPoster {
	qps := make([]sendPoster, len(e.res.qps))
	for i, qp := range e.res.qps {
		qps[i] = qp
	}
	return qps
}

// sendPoster and poller are what warmUpWith needs of a QP and a CQ.
type (
	sendPoster interface {
		PostSend(wr []uverbs.SendWR) (int, error)
	}
	poller interface {
		Poll(wc []uverbs.WC) (int, error)
	}
)

func (e *engine) warmUpWith(s *wrSet, qps []sendPoster, sendCQ poller) error {
	wc := make([]uverbs.WC, pollBatch)
	// Clean up the pipe, as perftest does.
	if _, err := sendCQ.Poll(wc); err != nil {
		return &Error{Kind: KindPoll, op: opPollSend, Err: err}
	}
	posts := warmUpPosts(e.cfg)
	for i, qp := range qps {
		want := 0
		units := postUnits(uint64(len(s.wrs[i])))
		for k := 0; k < posts; k++ {
			e.pace.spend(units) // outside the measurement: no stamp to keep clear
			if _, err := qp.PostSend(s.wrs[i]); err != nil {
				return &Error{Kind: KindPost, op: opWarmUp, QP: i, Sent: uint64(k), Err: err}
			}
			want += signalled(s.wrs[i])
		}
		for got := 0; got < want; {
			n, err := sendCQ.Poll(wc[:min(pollBatch, want-got)])
			if err != nil {
				return &Error{Kind: KindPoll, op: opPollSend, Err: err}
			}
			if n == 0 && e.peerGone() {
				return e.goneErr()
			}
			for k := 0; k < n; k++ {
				if wc[k].Status != uverbs.WCSuccess {
					return compErr("client", &wc[k], uint64(posts), uint64(got))
				}
			}
			got += n
		}
	}
	return nil
}
