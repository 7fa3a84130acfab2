package ib

import (
	"fmt"

	"github.com/ibgo/ibgo/uverbs"
)

// Errors the medium meets on its own (issue 14: "QP to error, CQ overrun,
// peer gone, address not resolvable: counted, written to the error log
// with a cause, and recovered from where Aeron would recover, never a
// crash"). They are counted in Media's counters and reported through the
// handler the driver gives (driver.ErrorReporter), which counts them in
// the driver's Errors counter and writes them to its distinct error log.
// The texts name the endpoint and the cause but no changing number, so a
// repeated fault is one log entry with a count.
//
// Recovery: a UD QP in the error state (a receive or send completion in
// error, or the QP moved there) flushes every posted receive, so the
// transport restarts its receive path in place: the QP goes to RESET, the
// completions left are discarded, INIT (with the CM's attributes: port,
// P_Key, Q_Key), RTR and RTS follow as at creation (ucma_init_ud_qp), and
// the whole ring is posted again. The QP keeps its number and its
// multicast attachments, so peers and groups need nothing; the datagrams
// lost meanwhile are Aeron's to recover (NAKs, retransmits), as a UDP
// socket's drops are. A failed CQ cannot be restarted in place: the
// endpoint is rebuilt (cqerror.go).

// SetErrorHandler implements driver.ErrorReporter: report receives every
// error the medium meets outside the driver's calls. Safe for concurrent
// use; nil stops reporting.
func (m *Media) SetErrorHandler(report func(error)) {
	if report == nil {
		m.handler.Store(nil)
		return
	}
	m.handler.Store(&report)
}

// report hands err to the driver's handler, if any.
func (m *Media) report(err error) {
	if h := m.handler.Load(); h != nil {
		(*h)(err)
	}
}

// recvFault notes a receive completion in error: the QP is in the error
// state (a UD receive error moves it there; a flush means it was already),
// so Recv restarts the receive path once the completions at hand are done.
func (t *transport) recvFault(w *uverbs.WC) {
	if w.Status != uverbs.WCWRFlushErr {
		t.m.RecvErrors.Add(1)
	}
	if t.broken {
		return
	}
	t.broken = true
	t.cause = "receive completion " + w.Status.String()
}

// sendFault notes a send completion in error (counted by reap).
func (t *transport) sendFault(w *uverbs.WC) {
	if t.broken {
		return
	}
	t.broken = true
	t.cause = "send completion " + w.Status.String()
}

// restart brings a QP in the error state back to RTS and reposts the whole
// receive ring (see above). A failure is reported and returned: the
// transport then stays broken and the next Recv tries again.
func (t *transport) restart() error {
	t.m.QPRestarts.Add(1)
	local := t.ep.LocalAddr().String()
	t.m.report(fmt.Errorf("ib: UD QP of %s went to the error state (%s); its receive path was restarted", local, t.cause))
	fail := func(step string, err error) error {
		err = fmt.Errorf("ib: restart the UD QP of %s: %s: %w", local, step, err)
		t.m.report(err)
		return err
	}
	if err := t.qp.Reset(); err != nil {
		return fail("to RESET", err)
	}
	for { // completions of the old incarnation: their buffers are reposted below
		n, err := t.cq.Poll(t.wcs[:])
		if err != nil || n == 0 {
			break
		}
	}
	if err := t.ep.ID().ModifyQP(t.qp, uverbs.QPStateInit, nil); err != nil {
		return fail("to INIT", err)
	}
	if err := t.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err != nil {
		return fail("to RTR", err)
	}
	if err := t.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN); err != nil {
		return fail("to RTS", err)
	}
	t.pending, t.pendAt = t.pending[:0], 0
	t.sendFree, t.sendHead, t.sendTail = sendSlots, 0, 0
	// sends of the old incarnation are gone: the registered logs they
	// pointed into are no longer read by the device (regmem.go)
	t.slots.freeAll()
	t.posted = 0
	for i := 0; i < t.ring; i++ {
		if err := t.postRecv(i); err != nil {
			return fail("repost the receive ring", err)
		}
	}
	t.broken = false
	return nil
}
