package perftest

import (
	"net"
	"syscall"
)

// The loops that wait on the peer (a spin on memory the peer writes, a
// receive CQ) stop when the peer's process is gone: its kernel closed the
// out-of-band TCP connection. perftest spins forever there.

// watchdog checks the control connection for a hang-up without reading
// from it (the exchange after the test still needs its bytes).
type watchdog struct {
	rc    syscall.RawConn // nil: nothing to watch
	spins uint32
	next  int64
}

const (
	watchEvery    = 1 << 12 // spins between clock reads
	watchInterval = 100e6   // ns between polls
	waitYield     = 4e6     // ns between passes through the scheduler while waiting
)

func (e *engine) startWatchdog() {
	if tc, ok := e.sess.oob.c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			e.sess.wd.rc = rc
		}
	}
}

// peerGone is cheap enough for every spin: a counter in the caller's loop
// (it inlines), a clock read every 4096 spins, a poll at most every 100 ms.
func (e *engine) peerGone() bool {
	e.sess.wd.spins++
	if e.sess.wd.spins%watchEvery != 0 {
		return false
	}
	return e.peerGoneCheck()
}

// peerGoneCheck also ends the loops when the run's context is cancelled
// (Run reports the context's error then, not a dead peer).
//
// While it waits for the peer, a loop passes through the scheduler every
// waitYield (4 ms). A goroutine that runs 10 ms without doing so is
// preempted by the runtime's monitor with a signal (SIGURG), which under
// emulation costs 0.3-0.4 ms each time and, measured, made a ping-pong
// slower the longer it ran: in the 6.1 VM, send_lat's last windows of 1000
// iterations were 3-7 % slower than its first with the signals and under
// 1 % without (make levels-vm; C perftest's runs stay flat). A pass here
// costs a few microseconds of one wait, which is time a sample spends
// waiting anyway; the signal it replaces lands in a sample too. The pass is
// the pacer's, so in the bandwidth loops, whose idle polls come here too,
// it shares their pacer's deadline. On hardware it is one scheduler call
// every few ms.
func (e *engine) peerGoneCheck() bool {
	w := &e.sess.wd
	now := clk.now()
	e.pace.pass(now, waitYield)
	if now < w.next {
		return false
	}
	w.next = now + watchInterval
	if e.ctx.Err() != nil {
		return true
	}
	return e.oobGone()
}

// oobGone looks at the control connection: a TCP hang-up, or (rdma_cm, -z)
// the peer's disconnect.
func (e *engine) oobGone() bool {
	if o := e.sess.oob; o != nil && o.cm != nil {
		return o.cm.gone.Load()
	}
	w := &e.sess.wd
	if w.rc == nil {
		return false
	}
	gone, err := peerHungUp(w.rc)
	return gone || err != nil
}

// goneErr is the error a loop returns when peerGone said stop.
func (e *engine) goneErr() error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	return errPeerGone()
}
