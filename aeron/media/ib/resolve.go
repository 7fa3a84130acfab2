package ib

import (
	"fmt"
	"time"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/cm"
)

// A unicast publication's transport resolved its subscription's QP once,
// by SIDR. When the subscriber's driver restarts, its new endpoint has a
// new QP number: datagrams sent to the old one are dropped by the fabric,
// and the new subscription never sees a SETUP to answer. UDP has no such
// state (the port is the address), so Aeron has no rule for it; here the
// transport notices that its subscription fell silent (receivers send
// status messages every status-message timeout, 200 ms by default, so a
// live one is never silent for long) and resolves it again: it releases
// its endpoint and resolves in the background exactly as a publication
// added before its subscription does (dialLoop). Meanwhile datagrams are
// dropped as on an unconnected UDP path, and Aeron's own timeouts and
// retransmits decide the rest.

// ReresolveAfter is how long a resolved unicast publication may hear
// nothing from its subscription before it resolves it again.
var ReresolveAfter = 3 * time.Second

// dialArgs are what dial needs again to resolve anew.
type dialArgs struct {
	opts   *cm.UDOptions
	p      driver.TransportParams
	aff    driver.Affinity
	window int
	ring   int
}

// checkSilence is called by Recv after each poll that delivered n
// datagrams. The clock is read only on empty polls.
func (t *transport) checkSilence(n int) {
	if n > 0 {
		t.heard = true
		return
	}
	if t.kind != kindDial {
		return // not a unicast publication: nothing to resolve
	}
	now := time.Now().UnixNano()
	if t.heard {
		t.lastRecv, t.heard = now, false
		return
	}
	if now-t.lastRecv < ReresolveAfter.Nanoseconds() {
		return
	}
	t.m.Reresolves.Add(1)
	t.reresolve()
}

// reresolve releases a unicast publication's endpoint and resolves its
// subscription again in the background (dialLoop), with a new QP and CQ:
// after its subscription fell silent, or after its CQ failed (cqerror.go).
func (t *transport) reresolve() {
	if err := t.dropRegistrations(); err != nil {
		t.m.report(fmt.Errorf("ib: re-resolve %s: deregister publication logs: %w", t.connect, err))
	}
	_ = t.release() // ready is false from here until the new dial succeeds
	t.startDialLoop()
}
