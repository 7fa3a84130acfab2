package perftest

import (
	"sync/atomic"
	"time"
)

const (
	stStart = iota
	stSample
	stStopSample
	stEnd
)

// durationClock is perftest's SIGALRM state machine (catch_alarm): margin
// seconds of warm-up, the sampled window, margin seconds of cool-down. One
// goroutine of its own steps it; the test's loop reads the state with an
// atomic load. That goroutine touches nothing of the engine but the CPU
// samples, and stop waits for it to finish, so whatever it wrote is the
// loop's to read afterwards. (It reads the clock through clk, never
// through the loop's pacer.)
type durationClock struct {
	state  atomic.Int32
	t0, t1 atomic.Int64
	window time.Duration
	cpu    *cpuUtil
	quit   chan struct{}
	done   chan struct{}
}

func startDuration(margin, window time.Duration, cpu *cpuUtil) *durationClock {
	d := &durationClock{window: window, cpu: cpu, quit: make(chan struct{}), done: make(chan struct{})}
	go d.run(margin, window, cpu)
	return d
}

func (e *engine) startDuration() *durationClock {
	c := e.cfg
	return startDuration(time.Duration(c.Margin)*time.Second, time.Duration(c.Duration-2*c.Margin)*time.Second, &e.meas.cpu)
}

func (d *durationClock) run(margin, window time.Duration, cpu *cpuUtil) {
	defer close(d.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	wait := func(span time.Duration) bool {
		if span <= 0 {
			return true
		}
		t.Reset(span)
		select {
		case <-t.C:
			return true
		case <-d.quit:
			return false
		}
	}
	if !wait(margin) {
		return
	}
	cpu.sample(0)
	d.t0.Store(clk.now())
	d.state.Store(stSample)
	if !wait(window) {
		return
	}
	d.t1.Store(clk.now())
	cpu.sample(1)
	d.state.Store(stStopSample)
	if !wait(margin) {
		return
	}
	d.state.Store(stEnd)
}

// stop ends the clock's goroutine and waits for it. Safe on nil and twice.
func (d *durationClock) stop() {
	if d == nil {
		return
	}
	select {
	case <-d.quit:
	default:
		close(d.quit)
	}
	<-d.done
}

// windowEndsWithin reports that the sampled window is running and ends
// within grace.
func (d *durationClock) windowEndsWithin(grace time.Duration) bool {
	return d != nil && d.state.Load() == stSample && clk.now()-d.t0.Load() >= int64(d.window-grace)
}

// cut stops the clock and, if the sampled window was still running, ends
// it now: the window's end timestamp and CPU sample are taken here instead
// of by the clock's goroutine (which stop has ended, so they are ours to
// write).
func (d *durationClock) cut() {
	d.stop()
	if d.state.Load() == stSample {
		d.t1.Store(clk.now())
		d.cpu.sample(1)
		d.state.Store(stEnd)
	}
}

// ended reports the end of the cool-down; false on nil (iterations mode).
func (d *durationClock) ended() bool { return d != nil && d.state.Load() == stEnd }

// sampling reports the sampled window.
func (d *durationClock) sampling() bool { return d != nil && d.state.Load() == stSample }

// finish makes the measurements the window's two timestamps (duration mode).
func (e *engine) finishDuration(d *durationClock) error {
	if d != nil {
		d.stop()
		e.meas.tposted, e.meas.tcompleted = []int64{d.t0.Load()}, []int64{d.t1.Load()}
	}
	return nil
}
