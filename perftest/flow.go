package perftest

// A flow is the order of exchanges, loops and reports of one side of one
// test, as perftest's eight mains (write_bw.c, send_lat.c, ...) lay it out.
// Both sides must make the same handshakes in the same order, so the flow
// is written down once per test family here, with named fields, and run by
// runFlow.
type flow struct {
	pre    preamble
	header header
	// passive: this side runs no loop; it waits for the peer's end-of-test
	// handshake (the unidirectional RDMA bandwidth server, which then
	// prints the client's report; the read/atomic latency server).
	passive         bool
	passiveReport   bool // the passive side receives and prints the peer's report
	warmUp          bool // --perform_warm_up before each size (RDMA bandwidth requester)
	postRecvs       bool // receives are posted before each size (the receiving side of send tests)
	syncBefore      bool // a handshake before each size's loop
	syncAfterLoop   bool // a handshake right after each size's loop (RDMA bandwidth -b -a)
	syncAfterReport bool // a handshake after each size's report exchange (send_bw -a)
	exchange        bool // each size's report is exchanged and both sides print the sum (-b)
	infSync         bool // --run_infinitely: a handshake before the loop (send_bw)
	loop            loopKind
	ending          ending
}

type header int

const (
	headerNone header = iota
	headerBW
	headerLat
)

type loopKind int

const (
	loopBW       loopKind = iota // run_iter_bw: the requester
	loopBWServer                 // run_iter_bw_server: send_bw's receiver
	loopBi                       // run_iter_bi: send_bw -b
	loopLatWrite                 // run_iter_lat_write
	loopLatSend                  // run_iter_lat_send
	loopLat                      // run_iter_lat: read and atomic latency
)

type ending int

const (
	endClose          ending = iota // separator, then the closing handshake
	endReportAndClose               // separator, handshake, report to the passive peer, close
	endLinger                       // separator; with -D a lingering close (write_lat has no closing exchange)
	endCloseThenLine                // close, then the separator (read/atomic latency client)
)

// flowFor is the table of perftest's mains: the static shape of each test
// family, completed with what depends on this side's role and options.
func flowFor(c *Config) flow {
	server := c.Server == ""
	t := c.Test
	switch {
	case t.Kind == BW && t.Verb != Send: // write_bw.c, read_bw.c, atomic_bw.c
		f := flow{pre: preamble{TrailingHS: true}, header: headerBW, loop: loopBW,
			passive: server && !c.Bidir, passiveReport: true,
			warmUp: c.WarmUp, syncBefore: c.Bidir, syncAfterLoop: c.Bidir && c.All, exchange: c.Bidir,
			ending: endReportAndClose}
		if c.Bidir {
			f.ending = endClose
		}
		return f
	case t.Kind == BW: // send_bw.c
		f := flow{pre: preamble{HSAfterConnect: true}, header: headerBW, loop: loopBW,
			postRecvs: server || c.Bidir, syncBefore: true, syncAfterReport: c.All, infSync: true,
			exchange: c.Bidir && c.Duration == 0, ending: endClose}
		switch {
		case c.Bidir:
			f.loop = loopBi
		case server:
			f.loop = loopBWServer
		}
		return f
	case t.Verb == Write: // write_lat.c
		return flow{pre: preamble{LeadingHS: true, TrailingHS: true}, header: headerLat, loop: loopLatWrite, ending: endLinger}
	case t.Verb == Send: // send_lat.c
		return flow{pre: preamble{HSAfterConnect: true}, header: headerLat, loop: loopLatSend,
			postRecvs: true, syncBefore: true, ending: endClose}
	default: // read_lat.c, atomic_lat.c: the server only waits and prints no results
		f := flow{pre: preamble{LeadingHS: true, TrailingHS: true}, header: headerLat, loop: loopLat, ending: endCloseThenLine}
		if server {
			f.header, f.passive = headerNone, true
		}
		return f
	}
}

func (e *engine) runFlow(f flow) error {
	c := e.cfg
	if err := e.runPreamble(f.pre); err != nil {
		return err
	}
	if err := e.armEvents(); err != nil {
		return err
	}
	switch f.header {
	case headerBW:
		e.bwHeader()
	case headerLat:
		e.latHeader()
	}
	if f.passive {
		return e.runPassive(f)
	}
	if c.RunInf {
		return e.runInfinitely(f)
	}
	var last bwReport
	for _, size := range e.sizes() {
		if f.warmUp {
			if err := e.warmUp(size); err != nil {
				return err
			}
		}
		if f.postRecvs {
			if err := e.postRecvs(size); err != nil {
				return err
			}
		}
		if f.syncBefore {
			if err := e.sync(); err != nil {
				return err
			}
		}
		if err := e.runLoop(f.loop, size, runOnce); err != nil {
			return err
		}
		if f.syncAfterLoop {
			if err := e.sync(); err != nil {
				return err
			}
		}
		if c.Test.Kind == LAT {
			e.printLat(size)
			continue
		}
		last = e.bwResult(size)
		if !f.exchange {
			e.printBW(last, nil)
		} else {
			rem, err := e.sess.oob.reports(last)
			if err != nil {
				return err
			}
			e.printBW(last, &rem)
			if c.ReportBoth && !c.All {
				e.reportBoth(last, rem)
			}
		}
		if f.syncAfterReport {
			if err := e.sync(); err != nil {
				return err
			}
		}
	}
	switch f.ending {
	case endReportAndClose:
		e.resultLine()
		if err := e.sync(); err != nil {
			return err
		}
		if _, err := e.sess.oob.reports(last); err != nil {
			return err
		}
		return e.closeConn()
	case endLinger:
		e.resultLine()
		if c.Duration != 0 {
			e.linger(lingerMax)
		}
		return nil
	case endCloseThenLine:
		if err := e.closeConn(); err != nil {
			return err
		}
		e.resultLine()
		return nil
	default:
		e.resultLine()
		return e.closeConn()
	}
}

// runPassive is the side that only waits for the peer to finish.
func (e *engine) runPassive(f flow) error {
	if f.passiveReport {
		if err := e.sync(); err != nil {
			return err
		}
		rem, err := e.sess.oob.reports(bwReport{})
		if err != nil {
			return err
		}
		e.printBW(rem, nil)
	}
	if err := e.closeConn(); err != nil {
		return err
	}
	e.resultLine()
	return nil
}

// runInfinitely is --run_infinitely (bandwidth tests): one size, a report
// line every -D seconds, until the process is stopped.
func (e *engine) runInfinitely(f flow) error {
	server := e.cfg.Server == ""
	if f.infSync {
		if server && f.postRecvs {
			if err := e.postRecvs(e.cfg.Size); err != nil {
				return err
			}
		}
		if err := e.sync(); err != nil {
			return err
		}
	}
	return e.runLoop(f.loop, e.cfg.Size, runForever)
}

type runMode int

const (
	runOnce    runMode = iota // -n iterations, or one -D window
	runForever                // --run_infinitely
)

func (e *engine) runLoop(k loopKind, size int, mode runMode) error {
	switch k {
	case loopBW:
		return e.iterBW(size, mode)
	case loopBWServer:
		return e.iterBWServer(size, mode)
	case loopBi:
		return e.iterBi(size)
	case loopLatWrite:
		return e.iterLatWrite(size)
	case loopLatSend:
		return e.iterLatSend(size)
	default:
		return e.iterLat(size)
	}
}

func (e *engine) sizes() []int {
	c := e.cfg
	if !c.All {
		return []int{c.Size}
	}
	maxPow := 23
	if c.Conn == UD {
		maxPow = 0
		for 1<<(maxPow+1) <= e.hw.mtu.Bytes() {
			maxPow++
		}
	}
	var s []int
	for i := 1; i <= maxPow; i++ {
		s = append(s, 1<<i)
	}
	return s
}

func (e *engine) reportBoth(local, rem bwReport) {
	if e.cfg.Output != OutputFull || e.cfg.JSON {
		return
	}
	for _, x := range []struct {
		name string
		r    bwReport
	}{{"Local", local}, {"Remote", rem}} {
		e.pr.print(resultLine)
		e.pr.printf("\n %s results: \n", x.name)
		e.bwHeader()
		e.printBW(x.r, nil)
	}
}
