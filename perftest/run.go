package perftest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ibgo/ibgo/uverbs"
)

// Version is what -V prints: the perftest protocol version ibgo speaks.
const Version = protoVersion

// Run runs test t with a perftest command line and returns the exit status.
func Run(t Test, prog string, args []string, stdout, stderr io.Writer) int {
	p, err := Parse(t, prog, args)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			fmt.Fprint(stdout, resultLine)
			fmt.Fprintln(stderr, pe.Msg)
			if pe.ShowUsage {
				fmt.Fprint(stdout, Usage(t, prog))
			}
			return 1
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	if p.Help {
		fmt.Fprint(stdout, Usage(t, prog))
		return 0
	}
	if p.Version {
		fmt.Fprintf(stdout, "Version: %s\n", Version)
		return 0
	}
	for _, n := range p.Notices {
		fmt.Fprint(stdout, n)
	}
	initClock()
	e := &engine{p: p, out: stdout, errw: stderr}
	defer e.close()
	if err := e.run(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := e.writeJSONFile(); err != nil {
		fmt.Fprintf(stderr, " Couldn't write %s: %v\n", p.JSONFile, err)
		return 1
	}
	if e.limitFailed {
		if p.LimitBW > 0 {
			fmt.Fprintln(stderr, "Error: BW result is below bw limit")
		}
		if p.LimitMR > 0 {
			fmt.Fprintln(stderr, "Error: Msg rate  is below msg_rate limit")
		}
		return 1
	}
	return 0
}

func (e *engine) run() error {
	p := e.p
	if err := e.open(); err != nil {
		return err
	}
	if p.CPUUtil {
		if p.Duration == 0 {
			fmt.Fprint(e.out, resultLine)
			fmt.Fprintln(e.errw, " CPU Utilization works only with Duration mode.")
		} else {
			e.cpu.enabled = true
		}
	}
	if err := e.establish(); err != nil {
		return err
	}
	if err := e.setup(); err != nil {
		return err
	}
	e.banner()
	switch {
	case p.Test.Kind == BW && p.Test.Verb != Send:
		return e.flowRDMABW()
	case p.Test.Kind == BW:
		return e.flowSendBW()
	case p.Test.Verb == Write:
		return e.flowWriteLat()
	case p.Test.Verb == Send:
		return e.flowSendLat()
	default:
		return e.flowReadLat()
	}
}

// keys exchanges every QP's key (H×Q) and keeps the remote ones.
func (e *engine) keys(print bool) error {
	e.remote = make([]Dest, len(e.local))
	for i := range e.local {
		d, err := e.oob.handshake(e.local[i])
		if err != nil {
			return err
		}
		e.remote[i] = d
		if print {
			e.printDest("remote", d)
		}
	}
	return nil
}

func (e *engine) hs() error {
	_, err := e.oob.handshake(e.local[0])
	return err
}

func (e *engine) printLocal() {
	for _, d := range e.local {
		e.printDest("local", d)
	}
}

// preamble is the exchange before the data phase. Its shape differs per
// test (perftest's mains), and both sides must make the same number of
// handshakes in the same order.
func (e *engine) preamble(leadingHS, hsAfterConnect, trailingHS bool) error {
	if leadingHS {
		if err := e.hs(); err != nil {
			return err
		}
	}
	if err := e.keys(false); err != nil {
		return err
	}
	if err := e.checkGIDs(); err != nil {
		return err
	}
	if err := e.connect(); err != nil {
		return err
	}
	if hsAfterConnect {
		if err := e.hs(); err != nil {
			return err
		}
	}
	e.printLocal()
	if err := e.keys(true); err != nil {
		return err
	}
	if trailingHS {
		return e.hs()
	}
	return nil
}

func (e *engine) sizes() []int {
	p := e.p
	if !p.All {
		return []int{p.Size}
	}
	maxPow := 23
	if p.Conn == UD {
		maxPow = 0
		for 1<<(maxPow+1) <= e.mtu.Bytes() {
			maxPow++
		}
	}
	var s []int
	for i := 1; i <= maxPow; i++ {
		s = append(s, 1<<i)
	}
	return s
}

// flowRDMABW is write_bw.c / read_bw.c / atomic_bw.c.
func (e *engine) flowRDMABW() error {
	p := e.p
	if err := e.preamble(false, false, true); err != nil {
		return err
	}
	e.bwHeader()
	if p.Server == "" && !p.Bidir {
		// The responder's CPU stays idle: wait for the client to finish,
		// then print the client's numbers.
		if err := e.hs(); err != nil {
			return err
		}
		rem, err := e.oob.reports(bwReport{})
		if err != nil {
			return err
		}
		e.printBW(rem, nil)
		if err := e.oob.closeConn(e.local[0]); err != nil {
			return err
		}
		e.resultLine()
		return nil
	}
	if p.RunInf {
		return e.iterBW(p.Size, true)
	}
	var last bwReport
	for _, size := range e.sizes() {
		if p.WarmUp {
			if err := e.warmUp(size); err != nil {
				return err
			}
		}
		if p.Bidir {
			if err := e.hs(); err != nil {
				return err
			}
		}
		if err := e.iterBW(size, false); err != nil {
			return err
		}
		if p.Bidir && p.All {
			if err := e.hs(); err != nil {
				return err
			}
		}
		last = e.bwResult(size)
		if !p.Bidir {
			e.printBW(last, nil)
		} else {
			rem, err := e.oob.reports(last)
			if err != nil {
				return err
			}
			e.printBW(last, &rem)
			if p.ReportBoth && !p.All {
				e.reportBoth(last, rem)
			}
		}
	}
	e.resultLine()
	if !p.Bidir {
		if err := e.hs(); err != nil {
			return err
		}
		if _, err := e.oob.reports(last); err != nil {
			return err
		}
	}
	return e.oob.closeConn(e.local[0])
}

func (e *engine) reportBoth(local, rem bwReport) {
	if e.p.Output != OutputFull || e.p.JSON {
		return
	}
	for _, x := range []struct {
		name string
		r    bwReport
	}{{"Local", local}, {"Remote", rem}} {
		fmt.Fprint(e.out, resultLine)
		fmt.Fprintf(e.out, "\n %s results: \n", x.name)
		e.bwHeader()
		e.printBW(x.r, nil)
	}
}

// flowSendBW is send_bw.c.
func (e *engine) flowSendBW() error {
	p := e.p
	if err := e.preamble(false, true, false); err != nil {
		return err
	}
	e.bwHeader()
	server := p.Server == ""
	if p.RunInf {
		if server {
			if err := e.postRecvs(p.Size); err != nil {
				return err
			}
		}
		if err := e.hs(); err != nil {
			return err
		}
		if server {
			return e.iterBWServer(p.Size, true)
		}
		return e.iterBW(p.Size, true)
	}
	for _, size := range e.sizes() {
		if server || p.Bidir {
			if err := e.postRecvs(size); err != nil {
				return err
			}
		}
		if err := e.hs(); err != nil {
			return err
		}
		var err error
		switch {
		case p.Bidir:
			err = e.iterBi(size)
		case server:
			err = e.iterBWServer(size, false)
		default:
			err = e.iterBW(size, false)
		}
		if err != nil {
			return err
		}
		r := e.bwResult(size)
		if !p.Bidir || p.Duration != 0 {
			e.printBW(r, nil)
		}
		if p.Bidir && p.Duration == 0 {
			rem, err := e.oob.reports(r)
			if err != nil {
				return err
			}
			e.printBW(r, &rem)
			if p.ReportBoth && !p.All {
				e.reportBoth(r, rem)
			}
		}
		if p.All {
			if err := e.hs(); err != nil {
				return err
			}
		}
	}
	e.resultLine()
	return e.oob.closeConn(e.local[0])
}

// flowWriteLat is write_lat.c: no close handshake, both sides just exit.
func (e *engine) flowWriteLat() error {
	if err := e.preamble(true, false, true); err != nil {
		return err
	}
	e.latHeader()
	for _, size := range e.sizes() {
		if err := e.iterLatWrite(size); err != nil {
			return err
		}
		e.printLat(size)
	}
	e.resultLine()
	if e.p.Duration != 0 {
		e.linger(lingerMax)
	}
	return nil
}

// lingerMax bounds how long write_lat -D waits for its peer to finish.
const lingerMax = 10 * time.Second

// linger keeps the QP (and so the peer's last RDMA write) alive until the
// peer is done. write_lat -D has no closing exchange: each side stops on its
// own clock, and a side that exits first takes its QP with it while the
// other may still wait for the completion of a write it just posted (the
// kernel acks it only while the QP exists, and rxe never gives up with
// retry-exceeded: perftest then spins forever). So, like a TCP lingering
// close: say we are done (half-close), then wait for the peer to close its
// side (perftest: when it exits; ibgo: when it lingers too), at most max.
func (e *engine) linger(max time.Duration) {
	tc, ok := e.oob.c.(*net.TCPConn)
	if !ok {
		return
	}
	tc.CloseWrite()
	tc.SetReadDeadline(time.Now().Add(max))
	var b [64]byte
	for {
		if _, err := tc.Read(b[:]); err != nil {
			return
		}
	}
}

// flowSendLat is send_lat.c.
func (e *engine) flowSendLat() error {
	if err := e.preamble(false, true, false); err != nil {
		return err
	}
	e.latHeader()
	for _, size := range e.sizes() {
		if err := e.postRecvs(size); err != nil {
			return err
		}
		if err := e.hs(); err != nil {
			return err
		}
		if err := e.iterLatSend(size); err != nil {
			return err
		}
		e.printLat(size)
	}
	e.resultLine()
	return e.oob.closeConn(e.local[0])
}

// flowReadLat is read_lat.c / atomic_lat.c: the server is passive and
// prints no results.
func (e *engine) flowReadLat() error {
	if err := e.preamble(true, false, true); err != nil {
		return err
	}
	if e.p.Server == "" {
		if err := e.oob.closeConn(e.local[0]); err != nil {
			return err
		}
		e.resultLine()
		return nil
	}
	e.latHeader()
	for _, size := range e.sizes() {
		if err := e.iterLat(size); err != nil {
			return err
		}
		e.printLat(size)
	}
	if err := e.oob.closeConn(e.local[0]); err != nil {
		return err
	}
	e.resultLine()
	return nil
}

// ---- work requests ----

// sendWRs builds each QP's post list of send work requests for size
// (perftest: ctx_set_send_wqes), returning them and their base addresses.
type wrSet struct {
	wrs   [][]uverbs.SendWR
	sges  [][]uverbs.SGE
	local []uint64 // each QP's first local address
	rem   []uint64 // each QP's first remote address
}

func (e *engine) sendWRs(size int) *wrSet {
	p := e.p
	s := &wrSet{}
	op := map[Verb]uverbs.WROpcode{Send: uverbs.WRSend, Write: uverbs.WRRDMAWrite, Read: uverbs.WRRDMARead}[p.Test.Verb]
	if p.Test.Verb == Atomic {
		op = uverbs.WRAtomicFetchAndAdd
		if p.AtomicCAS {
			op = uverbs.WRAtomicCmpAndSwp
		}
	}
	flags := uverbs.SendSignaled
	if size <= p.Inline && p.Test.Verb != Read && p.Test.Verb != Atomic {
		flags |= uverbs.SendInline
	}
	step := inc(size, e.cacheLine)
	cycle := size <= e.pageSize/2
	for i := range e.qps {
		base := e.mr.Addr() + uint64(i*e.bufSize)
		rbase := e.remote[i].VAddr
		wrs := make([]uverbs.SendWR, p.PostList)
		sges := make([]uverbs.SGE, p.PostList)
		for j := range wrs {
			off := uint64(0)
			if cycle && p.PostList > 1 {
				off = uint64(j*step) % uint64(e.pageSize)
			}
			sges[j] = uverbs.SGE{Addr: base + off, Length: uint32(size), LKey: e.mr.LKey()}
			wrs[j] = uverbs.SendWR{WRID: uint64(i), Opcode: op, Flags: flags, SGL: sges[j : j+1],
				RemoteAddr: rbase + off, RKey: e.remote[i].RKey}
			if p.Test.Verb == Atomic {
				wrs[j].CompareAdd, wrs[j].Swap = 1, 0 // ATOMIC_ADD_VALUE, ATOMIC_SWAP_VALUE
			}
			if p.Conn == UD {
				wrs[j].AH, wrs[j].RemoteQPN, wrs[j].RemoteQKey = e.ahs[i], e.remote[i].QPN, defQKey
			}
			if j < p.PostList-1 {
				wrs[j].Flags &^= uverbs.SendSignaled
			}
		}
		s.wrs, s.sges = append(s.wrs, wrs), append(s.sges, sges)
		s.local, s.rem = append(s.local, base), append(s.rem, rbase)
	}
	return s
}

// advance moves a single-WR post to the next cache-line-aligned slot of the
// page-sized window, as perftest's increase_loc_addr/increase_rem_addr do.
func (e *engine) advance(s *wrSet, i int, size int, scnt uint64) {
	if e.p.PostList != 1 || size > e.pageSize/2 {
		return
	}
	step := uint64(inc(size, e.cacheLine))
	wr := &s.wrs[i][0]
	if (scnt+1)%(uint64(e.pageSize)/step) == 0 {
		s.sges[i][0].Addr = s.local[i]
		wr.RemoteAddr = s.rem[i]
	} else {
		s.sges[i][0].Addr += step
		wr.RemoteAddr += step
	}
}

// recvWRs posts rx_depth receives on each QP (ctx_set_recv_wqes).
type recvSet struct {
	wrs  [][]uverbs.RecvWR
	sges [][]uverbs.SGE
}

func (e *engine) postRecvs(size int) error {
	p := e.p
	rs := &recvSet{}
	ln := size
	if p.Conn == UD {
		ln += 40
	}
	for i := range e.qps {
		base := e.mr.Addr() + uint64((p.NumQPs+i)*e.bufSize)
		sge := []uverbs.SGE{{Addr: base, Length: uint32(ln), LKey: e.mr.LKey()}}
		wr := []uverbs.RecvWR{{WRID: uint64(i), SGL: sge}}
		rs.wrs, rs.sges = append(rs.wrs, wr), append(rs.sges, sge)
		n := p.RxDepth
		if e.srq != nil {
			if i > 0 {
				continue
			}
		}
		for k := 0; k < n; k++ {
			var err error
			if e.srq != nil {
				_, err = e.srq.PostRecv(wr)
			} else {
				_, err = e.qps[i].PostRecv(wr)
			}
			if err != nil {
				return fmt.Errorf(" Couldn't post receive: qp %d: %v", i, err)
			}
		}
	}
	e.recvs = rs
	return nil
}

func (e *engine) repostRecv(i int) error {
	var err error
	if e.srq != nil {
		_, err = e.srq.PostRecv(e.recvs.wrs[0])
	} else {
		_, err = e.qps[i].PostRecv(e.recvs.wrs[i])
	}
	return err
}

func compErr(side string, wc uverbs.WC, scnt, ccnt uint64) error {
	return fmt.Errorf(" Completion with error at %s\n Failed status %d (%s): wr_id %d syndrom 0x%x\nscnt=%d, ccnt=%d",
		side, wc.Status, wc.Status, wc.WRID, wc.VendorErr, scnt, ccnt)
}

// ---- duration mode ----

const (
	stStart = iota
	stSample
	stStopSample
	stEnd
)

// durationClock is perftest's SIGALRM state machine (catch_alarm): margin
// seconds of warm-up, the sampled window, margin seconds of cool-down.
type durationClock struct {
	state  atomic.Int32
	t0, t1 atomic.Int64
	timer  *time.Timer
}

func (e *engine) startDuration() *durationClock {
	p := e.p
	d := &durationClock{}
	margin := time.Duration(p.Margin) * time.Second
	window := time.Duration(p.Duration-2*p.Margin) * time.Second
	toSample := func() {
		e.cpu.sample(0)
		d.t0.Store(e.now())
		d.state.Store(stSample)
		d.timer = time.AfterFunc(window, func() {
			d.t1.Store(e.now())
			e.cpu.sample(1)
			d.state.Store(stStopSample)
			d.timer = time.AfterFunc(margin, func() { d.state.Store(stEnd) })
		})
	}
	if margin > 0 {
		d.timer = time.AfterFunc(margin, toSample)
	} else {
		toSample()
	}
	return d
}

// ---- bandwidth loops ----

func (e *engine) resetTimes(n int) {
	if e.p.NoPeak {
		e.tposted, e.tcompleted = make([]int64, 1), make([]int64, 1)
	} else {
		e.tposted, e.tcompleted = make([]int64, n), make([]int64, n)
	}
	e.iters = 0
}

// iterBW is the requester's loop (perftest_resources.c: run_iter_bw): keep
// tx_depth work requests in flight per QP, ask for a completion every
// cq_mod of them, record post and completion times for the peak.
func (e *engine) iterBW(size int, infinite bool) error {
	p := e.p
	nq := len(e.qps)
	durMode := p.Duration != 0
	tot := uint64(p.Iters) * uint64(nq)
	e.resetTimes(int(tot))
	s := e.sendWRs(size)
	scnt, ccnt := make([]uint64, nq), make([]uint64, nq)
	var totS, totC uint64
	cqMod := uint64(p.CQMod)
	wc := make([]uverbs.WC, 16)
	var dur *durationClock
	var nextReport, lastT int64
	var lastIters uint64
	window := int64(p.Duration) * 1e9
	if durMode && !infinite {
		dur = e.startDuration()
		defer dur.timer.Stop()
	}
	if infinite {
		lastT = e.now()
		nextReport = lastT + window
	}
	if !durMode && p.NoPeak {
		e.tposted[0] = e.now()
	}
	for totS < tot || totC < tot || durMode && (infinite || dur.state.Load() != stEnd) {
		for i := 0; i < nq; i++ {
			if err := e.fillSQ(i, s, size, scnt, ccnt, &totS, dur); err != nil {
				return err
			}
		}
		if totC < tot || durMode && totC < totS {
			n, err := e.sendCQ.Poll(wc)
			if err != nil {
				return fmt.Errorf("poll CQ failed: %v", err)
			}
			if n == 0 && e.peerGone() {
				return errPeerGone
			}
			for k := 0; k < n; k++ {
				if err := e.sendDone(&wc[k], ccnt, &totC, totS, tot); err != nil {
					return err
				}
				if dur != nil && dur.state.Load() == stSample || infinite {
					e.iters += cqMod
				}
			}
		}
		if infinite {
			if now := e.now(); now >= nextReport {
				e.reportWindow(size, e.iters-lastIters, now-lastT)
				lastIters, lastT = e.iters, now
				nextReport += window
			}
		}
	}
	if !durMode && p.NoPeak {
		e.tcompleted[0] = e.now()
	}
	if dur != nil {
		e.tposted, e.tcompleted = []int64{dur.t0.Load()}, []int64{dur.t1.Load()}
	}
	return nil
}

// stallWatch notices a receiver that has had nothing for 60 s (perftest's
// "Did not get Message for 60 Seconds"). It shares the watchdog's spin
// counter: the clock is read once every watchEvery idle spins, not per spin.
type stallWatch struct {
	last  int64  // when progress was last seen
	count uint64 // the receive count then
}

func (s *stallWatch) stalled(e *engine, count uint64) bool {
	if e.wd.spins%watchEvery != 0 {
		return false
	}
	now := e.now()
	if count != s.count {
		s.count, s.last = count, now
		return false
	}
	return now-s.last > 60e9
}

// fillSQ is run_iter_bw's inner loop for QP i: post while the QP has room
// in its TX depth, signalling every cq_mod-th work request and the last.
func (e *engine) fillSQ(i int, s *wrSet, size int, scnt, ccnt []uint64, totS *uint64, dur *durationClock) error {
	p := e.p
	durMode := p.Duration != 0
	cqMod, postList, txDepth, iters := uint64(p.CQMod), uint64(p.PostList), uint64(p.TxDepth), uint64(p.Iters)
	wr := &s.wrs[i][0]
	for (scnt[i] < iters || durMode) && scnt[i]-ccnt[i]+postList <= txDepth {
		if postList == 1 && scnt[i]%cqMod == 0 && cqMod > 1 && !(scnt[i] == iters-1 && !durMode) {
			wr.Flags &^= uverbs.SendSignaled
		}
		if !p.NoPeak {
			e.tposted[*totS] = e.now()
		}
		if dur != nil && dur.state.Load() == stEnd {
			break
		}
		if n, err := e.qps[i].PostSend(s.wrs[i]); err != nil || n != len(s.wrs[i]) {
			return fmt.Errorf("Couldn't post send: qp %d scnt=%d: %v", i, scnt[i], err)
		}
		e.advance(s, i, size, scnt[i])
		scnt[i] += postList
		*totS += postList
		if postList == 1 && (scnt[i]%cqMod == cqMod-1 || (!durMode && scnt[i] == iters-1)) {
			wr.Flags |= uverbs.SendSignaled
		}
	}
	return nil
}

// sendDone accounts one send completion of the bandwidth loops: it stands
// for cq_mod work requests of its QP (wr_id), and stamps the completion time
// for the peak.
func (e *engine) sendDone(w *uverbs.WC, ccnt []uint64, totC *uint64, totS, tot uint64) error {
	if w.Status != uverbs.WCSuccess {
		return compErr("client", *w, totS, *totC)
	}
	cqMod := uint64(e.p.CQMod)
	ccnt[w.WRID] += cqMod
	*totC += cqMod
	if !e.p.NoPeak {
		e.tcompleted[min(*totC, tot)-1] = e.now()
	}
	return nil
}

// reportWindow prints one --run_infinitely line.
func (e *engine) reportWindow(size int, n uint64, ns int64) {
	factor := float64(mbFactor)
	if e.p.ReportGbits {
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

// iterBWServer is the send_bw receiver (run_iter_bw_server): count receives,
// repost while more are due. A silent peer (lost UD/UC datagrams) ends the
// run after 60 seconds without progress, as perftest's check_alive does.
func (e *engine) iterBWServer(size int, infinite bool) error {
	p := e.p
	nq := len(e.qps)
	durMode := p.Duration != 0
	tot := uint64(p.Iters) * uint64(nq)
	e.resetTimes(1)
	posted := make([]uint64, nq)
	for i := range posted {
		posted[i] = uint64(p.RxDepth)
	}
	var rcnt uint64
	wc := make([]uverbs.WC, 16)
	first := true
	var dur *durationClock
	stall := stallWatch{last: e.now()}
	var nextReport, lastT int64
	var lastIters uint64
	window := int64(p.Duration) * 1e9
	for rcnt < tot || durMode && (infinite || dur == nil || dur.state.Load() != stEnd) {
		n, err := e.recvCQ.Poll(wc)
		if err != nil {
			return fmt.Errorf("Poll Receive CQ failed: %v", err)
		}
		if n == 0 {
			if e.peerGone() {
				return errPeerGone
			}
			if !durMode && stall.stalled(e, rcnt) {
				fmt.Fprintf(e.errw, " Did not get Message for 60 Seconds, exiting..\n Total Received=%d, Total Iters Required=%d\n", rcnt, tot)
				break
			}
			if infinite && nextReport != 0 {
				if now := e.now(); now >= nextReport {
					e.reportWindow(size, e.iters-lastIters, now-lastT)
					lastIters, lastT = e.iters, now
					nextReport += window
				}
			}
			continue
		}
		if first {
			first = false
			switch {
			case infinite:
				lastT = e.now()
				nextReport = lastT + window
			case durMode:
				dur = e.startDuration()
				defer dur.timer.Stop()
			default:
				e.tposted[0] = e.now()
			}
		}
		for k := 0; k < n; k++ {
			w := &wc[k]
			if w.Status != uverbs.WCSuccess {
				return compErr("server", *w, 0, rcnt)
			}
			rcnt++
			if dur != nil && dur.state.Load() == stSample || infinite {
				e.iters++
			}
			qi := int(w.WRID)
			if durMode || posted[qi]+1 <= uint64(p.Iters) {
				if err := e.repostRecv(qi); err != nil {
					return fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d: %v", qi, rcnt, err)
				}
				posted[qi]++
			}
		}
	}
	if dur != nil {
		e.tposted, e.tcompleted = []int64{dur.t0.Load()}, []int64{dur.t1.Load()}
	} else {
		e.tcompleted[0] = e.now()
	}
	if !durMode {
		e.iters = rcnt
	}
	return nil
}

// iterBi is the bidirectional send loop (run_iter_bi): send and receive at
// once; the server starts sending only after its first receive.
func (e *engine) iterBi(size int) error {
	p := e.p
	nq := len(e.qps)
	durMode := p.Duration != 0
	tot := uint64(p.Iters) * uint64(nq)
	e.resetTimes(int(tot))
	s := e.sendWRs(size)
	scnt, ccnt, posted := make([]uint64, nq), make([]uint64, nq), make([]uint64, nq)
	for i := range posted {
		posted[i] = uint64(p.RxDepth)
	}
	var totS, totC, totR uint64
	iters := uint64(p.Iters)
	wc := make([]uverbs.WC, 16)
	before := p.Server == ""
	var dur *durationClock
	if !before && durMode {
		dur = e.startDuration()
		defer dur.timer.Stop()
	}
	if p.NoPeak {
		e.tposted[0] = e.now()
	}
	stall := stallWatch{last: e.now()}
	for durMode && (dur == nil || dur.state.Load() != stEnd) || totC < tot || totR < tot {
		for i := 0; i < nq && !before; i++ {
			if err := e.fillSQ(i, s, size, scnt, ccnt, &totS, dur); err != nil {
				return err
			}
		}
		n, err := e.recvCQ.Poll(wc)
		if err != nil {
			return err
		}
		if n > 0 {
			if before {
				before = false
				if durMode {
					dur = e.startDuration()
					defer dur.timer.Stop()
				}
			}
		}
		for k := 0; k < n; k++ {
			w := &wc[k]
			if w.Status != uverbs.WCSuccess {
				return compErr("server", *w, totS, totR)
			}
			totR++
			if dur != nil && dur.state.Load() == stSample {
				e.iters++
			}
			qi := int(w.WRID)
			if durMode || posted[qi]+1 <= iters {
				if err := e.repostRecv(qi); err != nil {
					return err
				}
				posted[qi]++
			}
		}
		if totC < tot || durMode && totC < totS {
			n, err := e.sendCQ.Poll(wc)
			if err != nil {
				return err
			}
			for k := 0; k < n; k++ {
				if err := e.sendDone(&wc[k], ccnt, &totC, totS, tot); err != nil {
					return err
				}
			}
		}
		if n == 0 && e.peerGone() {
			return errPeerGone
		}
		if n == 0 && !durMode && stall.stalled(e, totR) {
			return fmt.Errorf(" Did not get Message for 60 Seconds (received %d of %d)", totR, tot)
		}
	}
	if p.NoPeak && !durMode {
		e.tcompleted[0] = e.now()
	}
	if dur != nil {
		e.tposted, e.tcompleted = []int64{dur.t0.Load()}, []int64{dur.t1.Load()}
	}
	return nil
}

// warmUp posts one tx_depth burst per QP and waits for it (perform_warm_up).
func (e *engine) warmUp(size int) error {
	s := e.sendWRs(size)
	want := 0
	for i := range e.qps {
		for k := 0; k < e.p.TxDepth; k++ {
			if _, err := e.qps[i].PostSend(s.wrs[i][:1]); err != nil {
				return fmt.Errorf(" Failed to warm up: %v", err)
			}
			want++
		}
	}
	wc := make([]uverbs.WC, 16)
	for got := 0; got < want; {
		n, err := e.sendCQ.Poll(wc)
		if err != nil {
			return err
		}
		if n == 0 && e.peerGone() {
			return errPeerGone
		}
		for k := 0; k < n; k++ {
			if wc[k].Status != uverbs.WCSuccess {
				return compErr("client", wc[k], 0, uint64(got))
			}
		}
		got += n
	}
	return nil
}

// ---- latency loops ----

// byteAt reads a byte the device writes, without the compiler caching it:
// an atomic load of the aligned word that holds it.
func byteAt(b []byte, i int) byte {
	w := (*uint32)(unsafe.Pointer(&b[i&^3]))
	return byte(atomic.LoadUint32(w) >> (8 * uint(i&3)))
}

// iterLatWrite is run_iter_lat_write: each side writes size bytes into the
// peer's receive region with the last byte set to the iteration number, and
// spins on its own region's last byte; the server answers the client.
func (e *engine) iterLatWrite(size int) error {
	p := e.p
	durMode := p.Duration != 0
	iters := uint64(p.Iters)
	e.tposted, e.tcompleted = make([]int64, max(p.Iters, 1)), make([]int64, 1)
	e.iters = 0
	s := e.sendWRs(size)
	wr := &s.wrs[0][0]
	wr.Flags |= uverbs.SendSignaled
	buf := e.mem.Bytes()
	post := size - 1
	poll := e.bufSize*p.NumQPs + size - 1
	var scnt, ccnt, rcnt uint64
	var dur *durationClock
	if durMode {
		dur = e.startDuration()
		defer dur.timer.Stop()
	}
	ended := func() bool { return dur != nil && dur.state.Load() == stEnd }
	server := p.Server == ""
	wc := make([]uverbs.WC, 1)
	for scnt < iters || ccnt < iters || rcnt < iters || durMode && !ended() {
		if (rcnt < iters || durMode) && !(scnt < 1 && server) {
			rcnt++
			for byteAt(buf, poll) != byte(rcnt) && !ended() {
				if e.peerGone() {
					return e.peerLeftLat(dur)
				}
			}
		}
		if scnt < iters || durMode {
			e.stampPost(scnt)
			scnt++
			buf[post] = byte(scnt)
			if _, err := e.qps[0].PostSend(s.wrs[0]); err != nil {
				return fmt.Errorf("Couldn't post send: scnt=%d: %v", scnt, err)
			}
		}
		if ended() {
			break
		}
		if ccnt < iters || durMode {
			if stop, err := e.pollOneSend(wc, ended); err == errPeerGone {
				return e.peerLeftLat(dur)
			} else if err != nil {
				return err
			} else if stop {
				return e.finishDuration(dur)
			}
			if wc[0].Status != uverbs.WCSuccess {
				return compErr(map[bool]string{true: "server", false: "client"}[server], wc[0], scnt, ccnt)
			}
			ccnt++
			if dur != nil && dur.state.Load() == stSample {
				e.iters++
			}
		}
	}
	return e.finishDuration(dur)
}

// peerLeftLat decides what the peer closing the control connection means to
// write_lat. With -D each side runs its own clock and write_lat has no
// closing exchange, so a peer whose window ended first may be gone (or, an
// ibgo peer, lingering with its side half-closed) while we cool down: once
// our sampled window is over that is the end of the test. Before that, or
// without -D, the peer died.
func (e *engine) peerLeftLat(dur *durationClock) error {
	if dur != nil && dur.state.Load() >= stStopSample {
		return e.finishDuration(dur)
	}
	return errPeerGone
}

// stampPost waits out --latency_gap, then (without -D) stamps the post of
// iteration scnt.
func (e *engine) stampPost(scnt uint64) {
	if gap := int64(e.p.LatencyGap); gap > 0 {
		end := e.now() + gap
		for e.now() < end {
		}
	}
	if e.p.Duration == 0 {
		e.tposted[scnt] = e.now()
	}
}

// pollOneSend spins until the send CQ gives one completion (into wc[0]),
// the peer is gone (errPeerGone) or, with -D, the clock ends the test
// (stop). The latency loops have one signalled send outstanding at a time.
func (e *engine) pollOneSend(wc []uverbs.WC, ended func() bool) (stop bool, err error) {
	for {
		n, err := e.sendCQ.Poll(wc[:1])
		if err != nil {
			return false, err
		}
		if n == 1 {
			return false, nil
		}
		if e.peerGone() {
			return false, errPeerGone
		}
		if ended() {
			return true, nil
		}
	}
}

func (e *engine) finishDuration(dur *durationClock) error {
	if dur != nil {
		e.tposted, e.tcompleted = []int64{dur.t0.Load()}, []int64{dur.t1.Load()}
	}
	return nil
}

// iterLatSend is run_iter_lat_send: the server waits for a message before
// it answers; the client sends first.
func (e *engine) iterLatSend(size int) error {
	p := e.p
	durMode := p.Duration != 0
	iters := uint64(p.Iters)
	e.tposted, e.tcompleted = make([]int64, max(p.Iters, 1)), make([]int64, 1)
	e.iters = 0
	s := e.sendWRs(size)
	wr := &s.wrs[0][0]
	wr.Flags &^= uverbs.SendSignaled
	client := p.Server != ""
	var scnt, rcnt uint64
	var dur *durationClock
	ended := func() bool { return dur != nil && dur.state.Load() == stEnd }
	rwc, swc := make([]uverbs.WC, 1), make([]uverbs.WC, 1)
	first := true
	cqMod := uint64(p.CQMod)
	for scnt < iters || rcnt < iters || durMode && !ended() {
		if (rcnt < iters || durMode) && !(scnt < 1 && client) {
			for {
				if ended() {
					return e.finishDuration(dur)
				}
				n, err := e.recvCQ.Poll(rwc)
				if err != nil {
					return err
				}
				if n == 0 {
					if e.peerGone() {
						return errPeerGone
					}
					continue
				}
				if first && durMode {
					first = false
					dur = e.startDuration()
					defer dur.timer.Stop()
				}
				if rwc[0].Status != uverbs.WCSuccess {
					return compErr("server", rwc[0], scnt, rcnt)
				}
				rcnt++
				if dur != nil && dur.state.Load() == stSample {
					e.iters++
				}
				if durMode || rcnt+uint64(p.RxDepth) <= iters {
					if err := e.repostRecv(int(rwc[0].WRID)); err != nil {
						return err
					}
				}
				break
			}
		}
		if scnt < iters || durMode && !ended() {
			e.stampPost(scnt)
			scnt++
			poll := false
			if scnt%cqMod == 0 || !durMode && scnt == iters {
				poll = true
				wr.Flags |= uverbs.SendSignaled
			}
			if _, err := e.qps[0].PostSend(s.wrs[0]); err != nil {
				return fmt.Errorf("Couldn't post send: scnt=%d: %v", scnt, err)
			}
			if poll {
				if stop, err := e.pollOneSend(swc, ended); err != nil {
					return err
				} else if stop {
					return e.finishDuration(dur)
				}
				if swc[0].Status != uverbs.WCSuccess {
					return compErr("client", swc[0], scnt, scnt)
				}
				wr.Flags &^= uverbs.SendSignaled
			}
		}
	}
	return e.finishDuration(dur)
}

// iterLat is run_iter_lat (read and atomic latency): one operation at a
// time, polled to completion.
func (e *engine) iterLat(size int) error {
	p := e.p
	durMode := p.Duration != 0
	iters := uint64(p.Iters)
	e.tposted, e.tcompleted = make([]int64, max(p.Iters, 1)), make([]int64, 1)
	e.iters = 0
	s := e.sendWRs(size)
	s.wrs[0][0].Flags |= uverbs.SendSignaled
	var dur *durationClock
	if durMode {
		dur = e.startDuration()
		defer dur.timer.Stop()
	}
	ended := func() bool { return dur != nil && dur.state.Load() == stEnd }
	wc := make([]uverbs.WC, 1)
	var scnt uint64
	for scnt < iters || durMode && !ended() {
		e.stampPost(scnt)
		scnt++
		if _, err := e.qps[0].PostSend(s.wrs[0]); err != nil {
			return fmt.Errorf("Couldn't post send: scnt=%d: %v", scnt, err)
		}
		if ended() {
			break
		}
		if stop, err := e.pollOneSend(wc, ended); err != nil {
			return err
		} else if stop {
			return e.finishDuration(dur)
		}
		if wc[0].Status != uverbs.WCSuccess {
			return compErr("client", wc[0], scnt, scnt)
		}
		if dur != nil && dur.state.Load() == stSample {
			e.iters++
		}
	}
	return e.finishDuration(dur)
}
