package ib

import (
	"encoding/binary"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/uverbs"
)

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

// RCAckTimeouts returns the ACK timeout of every connection's QP of an
// ib-qp=rc transport (queried from the kernel) after applying the
// connections handed over so far. Only while no agent uses the transport.
func RCAckTimeouts(tr driver.Transport) ([]uint8, error) {
	t := tr.(*rcTransport)
	t.drain()
	var out []uint8
	for _, c := range t.byKey {
		a, _, err := c.qp.Query(uverbs.QPAttrTimeout)
		if err != nil {
			return nil, err
		}
		out = append(out, a.Timeout)
	}
	return out, nil
}

// UndersizeNextSharedCQ makes the next ib-qp=rc subscription's shared CQ
// hold only n completions, so that a burst overruns it (the device then
// raises CQ_ERR); the rebuilt one has its normal size.
func UndersizeNextSharedCQ(n int) { sharedCQForTest.Store(int32(n)) }

// WriteConnectData is the CONNECT private data of an ib-mode=write
// publication (the tests' hand-made peer).
func WriteConnectData(mtu int) []byte { return rcConnectData(mtu, rcConnWrite) }

// ParseGrant reads a subscription's grant message: the terms' address and
// rkey, the term length, the image slot; ok false for anything else.
func ParseGrant(b []byte) (addr uint64, rkey uint32, termLength int32, slot uint8, ok bool) {
	if len(b) < rcGrantLen || string(b[:4]) != rcGrantMagic || b[5]&grantDenied != 0 {
		return 0, 0, 0, 0, false
	}
	le := binary.LittleEndian
	return le.Uint64(b[32:]), le.Uint32(b[40:]), int32(le.Uint32(b[20:])), b[6], true
}
