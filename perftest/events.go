package perftest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// Completion events (-e, --events). perftest creates one completion channel
// for both CQs (ibv_create_comp_channel, the CQs on it with -X's vector),
// arms both CQs once before the test (ibv_req_notify_cq) and, in its loops,
// sleeps in ctx_notify_events (perftest_resources.h): take the channel's
// next event, whichever CQ it is for, acknowledge it (ibv_ack_cq_events)
// and re-arm that CQ; then poll. ibgo makes the same objects and the same
// calls in the same loops, with one change of order: it sleeps only when a
// poll has found the CQ it needs empty. perftest sleeps before every poll,
// which strands completions: an event taken while waiting for the other CQ
// (the channel is shared) or a completion left behind by a partial poll has
// no event any more, and the next sleep waits for one that may never come.
// Polling first cannot strand anything: each CQ is either armed or has its
// event queued, so an empty poll followed by a sleep always wakes.
//
// The wait blocks in the kernel (on the Go runtime poller), so the spinning
// loops' dead-peer check cannot run there: a watcher goroutine, started
// with the data phase, looks at the control connection every 100 ms and
// ends the wait when the peer hangs up, the run's context ends, or one wait
// lasts 60 s (perftest's check_alive: with events it cannot report and
// exits with an error, and so does ibgo).

const (
	eventWatchEvery = 100 * time.Millisecond
	eventStallTicks = 600 // 60 s of eventWatchEvery
)

// eventWait is the -e state of an engine. The loop goroutine waits and
// counts; the watcher only reads waiting/seq and sets stalled/gone before it
// cancels ctx.
type eventWait struct {
	ctx     context.Context // GetEvent's; the watcher cancels it
	cancel  context.CancelFunc
	stop    chan struct{} // closed by close: the watcher returns
	count   atomic.Uint64 // events taken
	seq     atomic.Uint64 // waits begun
	waiting atomic.Bool
	stalled atomic.Bool
	gone    atomic.Bool
}

// createChannel makes the completion channel when -e asks for one, after
// checking -X against the device (verify_params_with_device_context; its
// test is eq_num > num_comp_vectors, so the vector one past the last is let
// through to CQ creation, which refuses it, as with perftest).
func (e *engine) createChannel() error {
	p := e.cfg
	if !p.Events {
		return nil
	}
	if n := e.hw.ctx.NumCompVectors(); p.CompVector > n {
		return &Error{Kind: KindConfig, op: opCompVector, Device: e.hw.dev.Name, Value: n}
	}
	ch, err := e.hw.ctx.CreateCompChannel()
	if err != nil {
		return &Error{Kind: KindResource, op: opCompChannel, Device: e.hw.dev.Name, Err: err}
	}
	e.res.channel = ch
	return nil
}

// armEvents is what perftest's mains do once before the test: request a
// notification on the send CQ and, for send tests, the receive CQ. Then the
// watcher starts.
func (e *engine) armEvents() error {
	if e.res.channel == nil {
		return nil
	}
	cqs := []*uverbs.CQ{e.res.sendCQ}
	if e.res.recvCQ != e.res.sendCQ {
		cqs = append(cqs, e.res.recvCQ)
	}
	for _, cq := range cqs {
		if err := cq.ReqNotify(false); err != nil {
			return &Error{Kind: KindResource, op: opReqNotify, Device: e.hw.dev.Name, Err: err}
		}
	}
	ev := &e.ev
	ev.ctx, ev.cancel = context.WithCancel(e.ctx)
	ev.stop = make(chan struct{})
	go e.watchEvents()
	return nil
}

// watchEvents ends a wait that cannot end by itself: the peer hung up, or
// one wait has lasted 60 s.
func (e *engine) watchEvents() {
	ev := &e.ev
	t := time.NewTicker(eventWatchEvery)
	defer t.Stop()
	var lastSeq uint64
	stuck := 0
	for {
		select {
		case <-ev.stop:
			return
		case <-ev.ctx.Done():
			return
		case <-t.C:
		}
		if e.oobGone() {
			ev.gone.Store(true)
			ev.cancel()
			return
		}
		if s := ev.seq.Load(); ev.waiting.Load() && s == lastSeq {
			if stuck++; stuck >= eventStallTicks {
				ev.stalled.Store(true)
				ev.cancel()
				return
			}
		} else {
			lastSeq, stuck = s, 0
		}
	}
}

// stopEvents ends the watcher (close).
func (e *engine) stopEvents() {
	if e.ev.stop != nil {
		close(e.ev.stop)
		e.ev.cancel()
		e.ev.stop = nil
	}
}

// awaitEvent is ctx_notify_events: wait for the channel's next event,
// acknowledge it, re-arm its CQ. done and total are the loop's counts, for
// the stall message.
func (e *engine) awaitEvent(done, total uint64) error {
	ev := &e.ev
	ev.seq.Add(1)
	ev.waiting.Store(true)
	cq, err := e.res.channel.GetEvent(ev.ctx)
	ev.waiting.Store(false)
	if err != nil {
		switch {
		case e.ctx.Err() != nil:
			return e.ctx.Err()
		case ev.stalled.Load():
			return &Error{Kind: KindStall, op: opEventStall, Done: done, Value: int(total)}
		case ev.gone.Load():
			return errPeerGone()
		}
		return &Error{Kind: KindPoll, op: opCQEvent, Device: e.hw.dev.Name, Err: err}
	}
	cq.AckEvents(1)
	ev.count.Add(1)
	if err := cq.ReqNotify(false); err != nil {
		return &Error{Kind: KindPoll, op: opReqNotify, Device: e.hw.dev.Name, Err: err}
	}
	return nil
}
