package ib

import "github.com/ibgo/ibgo/aeron/driver"

// ForceQPError moves an ib transport's QP to the error state, as a local
// error or a fatal asynchronous event would, for the recovery tests.
func ForceQPError(tr driver.Transport) error {
	t := tr.(*transport)
	if !t.ready.Load() {
		return nil
	}
	return t.qp.ToErr()
}

// FailNextPoll makes the next poll of an ib transport's CQ fail, as a CQ
// in error (an overrun) fails it, for the recovery tests: a UD transport's
// CQ, an ib-qp=rc subscription's shared CQ, or an ib-qp=rc publication's
// connection CQ. The transport may be in use by its agent.
func FailNextPoll(tr driver.Transport) {
	switch t := tr.(type) {
	case *transport:
		t.failPoll.Store(true)
	case *rcTransport:
		t.failPoll.Store(true)
	}
}
