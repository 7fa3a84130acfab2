package perftest

import (
	"time"

	"github.com/ibgo/ibgo/internal/shm"
	"github.com/ibgo/ibgo/uverbs"
)

// The latency loops (perftest_resources.c: run_iter_lat_write,
// run_iter_lat_send, run_iter_lat). One timestamp per iteration, taken
// right before the post; the samples are the intervals between consecutive
// posts. Nothing else runs between two timestamps but the post, the wait
// for the peer and the poll: no allocation, no closure, and no pass
// through the scheduler except the wait's one every 4 ms (peerGoneCheck),
// which keeps the runtime from preempting the loop with signals.

func (e *engine) resetLatTimes() {
	e.meas.tposted, e.meas.tcompleted = make([]int64, max(e.cfg.Iters, 1)), make([]int64, 1)
	e.meas.iters = 0
}

// iterLatWrite is run_iter_lat_write: each side writes size bytes into the
// peer's receive region with the last byte set to the iteration number, and
// spins on its own region's last byte; the server answers the client.
func (e *engine) iterLatWrite(size int) error {
	c := e.cfg
	durMode := c.Duration != 0
	iters := uint64(c.Iters)
	e.resetLatTimes()
	s := e.sendWRs(size)
	wrs := s.wrs[0]
	wrs[0].Flags |= uverbs.SendSignaled
	buf := e.res.mem.Bytes()
	post := size - 1
	// The byte the peer writes last, read through an atomic load of the
	// aligned word that holds it, so the compiler reads memory every spin
	// (the device writes it, not a goroutine).
	poll := e.res.bufSize*c.NumQPs + size - 1
	word, shift := shm.Int32At(buf, poll&^3), 8*uint(poll&3)
	qp := e.res.qps[0]
	var scnt, ccnt, rcnt uint64
	var dur *durationClock
	if durMode {
		dur = e.startDuration()
		defer dur.stop()
	}
	server := c.Server == ""
	side := "client"
	if server {
		side = "server"
	}
	wc := make([]uverbs.WC, 1)
	for scnt < iters || ccnt < iters || rcnt < iters || durMode && !dur.ended() {
		if (rcnt < iters || durMode) && !(scnt < 1 && server) {
			rcnt++
			for byte(word.Load()>>shift) != byte(rcnt) && !dur.ended() {
				if e.peerGone() {
					return e.peerLeftLat(dur)
				}
			}
		}
		if scnt < iters || durMode {
			e.stampPost(scnt, durMode)
			scnt++
			buf[post] = byte(scnt)
			if _, err := qp.PostSend(wrs); err != nil {
				return &Error{Kind: KindPost, op: opPostSend, Sent: scnt, Err: err}
			}
		}
		if dur.ended() {
			break
		}
		if ccnt < iters || durMode {
			if stop, err := e.pollOneSend(wc, dur); err != nil {
				if e.ctx.Err() == nil && isPeerGone(err) {
					return e.peerLeftLat(dur)
				}
				return err
			} else if stop {
				return e.finishDuration(dur)
			}
			if wc[0].Status != uverbs.WCSuccess {
				return compErr(side, &wc[0], scnt, ccnt)
			}
			ccnt++
			if dur.sampling() {
				e.meas.iters++
			}
		}
	}
	return e.finishDuration(dur)
}

func isPeerGone(err error) bool {
	pe, ok := err.(*Error)
	return ok && pe.Kind == KindPeerGone
}

// peerLeftLat decides what the peer closing the control connection means to
// write_lat. With -D each side runs its own clock and write_lat has no
// closing exchange, so a peer whose window ended first may be gone (or, an
// ibgo peer, lingering with its side half-closed) while we cool down: once
// our sampled window is over that is the end of the test. The two clocks
// start apart by the last barrier's skew, so with no cool-down (-D under 4
// gives margin 0) the peer may also leave in the last moments of our
// window: within clockSkewGrace of its end, the window ends there (C's
// write_lat, which never watches the socket, would spin out its window
// with no more iterations; the rate is the same). Before that, or without
// -D, the peer died.
func (e *engine) peerLeftLat(dur *durationClock) error {
	if e.ctx.Err() == nil && dur != nil {
		if dur.windowEndsWithin(clockSkewGrace) {
			dur.cut()
		}
		if dur.state.Load() >= stStopSample {
			return e.finishDuration(dur)
		}
	}
	return e.goneErr()
}

// clockSkewGrace bounds how far apart two peers' duration clocks may
// start: the last barrier before the run, one TCP message each way, plus
// scheduling on a loaded machine.
const clockSkewGrace = time.Second

// stampPost waits out --latency_gap, then (without -D) stamps the post of
// iteration scnt.
func (e *engine) stampPost(scnt uint64, durMode bool) {
	if gap := int64(e.cfg.LatencyGap); gap > 0 {
		end := clk.now() + gap
		for clk.now() < end {
		}
	}
	if !durMode {
		e.meas.tposted[scnt] = clk.now()
	}
}

// pollOneSend spins until the send CQ gives one completion (into wc[0]),
// the peer is gone (a KindPeerGone error) or, with -D, the clock ends the
// test (stop). The latency loops have one signalled send outstanding at a
// time.
func (e *engine) pollOneSend(wc []uverbs.WC, dur *durationClock) (stop bool, err error) {
	cq := e.res.sendCQ
	events := e.res.channel != nil
	for {
		n, err := cq.Poll(wc[:1])
		if err != nil {
			return false, &Error{Kind: KindPoll, op: opPollSend, Err: err}
		}
		if n == 1 {
			return false, nil
		}
		if events {
			if err := e.awaitEvent(0, 0); err != nil {
				return false, err
			}
			continue
		}
		if e.peerGone() {
			return false, e.goneErr()
		}
		if dur.ended() {
			return true, nil
		}
	}
}

// iterLatSend is run_iter_lat_send: the server waits for a message before
// it answers; the client sends first.
func (e *engine) iterLatSend(size int) error {
	c := e.cfg
	durMode := c.Duration != 0
	iters := uint64(c.Iters)
	e.resetLatTimes()
	s := e.sendWRs(size)
	wrs := s.wrs[0]
	wr := &wrs[0]
	wr.Flags &^= uverbs.SendSignaled
	client := c.Server != ""
	qp, cq := e.res.qps[0], e.res.recvCQ
	var scnt, rcnt uint64
	var dur *durationClock
	defer func() { dur.stop() }()
	rwc, swc := make([]uverbs.WC, 1), make([]uverbs.WC, 1)
	first := true
	events := e.res.channel != nil
	cqMod := uint64(c.CQMod)
	rxDepth := uint64(c.RxDepth)
	for scnt < iters || rcnt < iters || durMode && !dur.ended() {
		if (rcnt < iters || durMode) && !(scnt < 1 && client) {
			for {
				if dur.ended() {
					return e.finishDuration(dur)
				}
				n, err := cq.Poll(rwc)
				if err != nil {
					return &Error{Kind: KindPoll, op: opPollRecv, Err: err}
				}
				if n == 0 && events {
					if err := e.awaitEvent(rcnt, iters); err != nil {
						return err
					}
					continue
				}
				if n == 0 {
					if e.peerGone() {
						return e.goneErr()
					}
					continue
				}
				if first && durMode {
					first = false
					dur = e.startDuration()
				}
				if rwc[0].Status != uverbs.WCSuccess {
					return compErr("server", &rwc[0], scnt, rcnt)
				}
				rcnt++
				if dur.sampling() {
					e.meas.iters++
				}
				if durMode || rcnt+rxDepth <= iters {
					qi, err := qpIndex(&rwc[0], 1, "server", scnt, rcnt)
					if err != nil {
						return err
					}
					if err := e.postRecv(qi); err != nil {
						return &Error{Kind: KindPost, op: opPostRecv, QP: qi, Done: rcnt, Err: err}
					}
				}
				break
			}
		}
		if scnt < iters || durMode && !dur.ended() {
			e.stampPost(scnt, durMode)
			scnt++
			poll := false
			if scnt%cqMod == 0 || !durMode && scnt == iters {
				poll = true
				wr.Flags |= uverbs.SendSignaled
			}
			if _, err := qp.PostSend(wrs); err != nil {
				return &Error{Kind: KindPost, op: opPostSend, Sent: scnt, Err: err}
			}
			if poll {
				if stop, err := e.pollOneSend(swc, dur); err != nil {
					return err
				} else if stop {
					return e.finishDuration(dur)
				}
				if swc[0].Status != uverbs.WCSuccess {
					return compErr("client", &swc[0], scnt, scnt)
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
	c := e.cfg
	durMode := c.Duration != 0
	iters := uint64(c.Iters)
	e.resetLatTimes()
	s := e.sendWRs(size)
	wrs := s.wrs[0]
	wrs[0].Flags |= uverbs.SendSignaled
	qp := e.res.qps[0]
	var dur *durationClock
	if durMode {
		dur = e.startDuration()
		defer dur.stop()
	}
	wc := make([]uverbs.WC, 1)
	var scnt uint64
	for scnt < iters || durMode && !dur.ended() {
		e.stampPost(scnt, durMode)
		scnt++
		if _, err := qp.PostSend(wrs); err != nil {
			return &Error{Kind: KindPost, op: opPostSend, Sent: scnt, Err: err}
		}
		if dur.ended() {
			break
		}
		if stop, err := e.pollOneSend(wc, dur); err != nil {
			return err
		} else if stop {
			return e.finishDuration(dur)
		}
		if wc[0].Status != uverbs.WCSuccess {
			return compErr("client", &wc[0], scnt, scnt)
		}
		if dur.sampling() {
			e.meas.iters++
		}
	}
	return e.finishDuration(dur)
}
