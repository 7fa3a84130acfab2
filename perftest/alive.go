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
func (e *engine) peerGoneCheck() bool {
	w := &e.sess.wd
	now := clk.now()
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
