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
