package ib

import (
	"errors"
	"fmt"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// QuiesceTimeout bounds how long releasing a registered log waits for the
// sends posted from it to complete.
var QuiesceTimeout = time.Second

// memReg is one region the driver registered (a publication's log): the
// MR over it once the endpoint has a device, and the bytes of it that
// posted sends may still read. Owned by the transport's agent, as the
// transport.
type memReg struct {
	b        []byte
	mr       *uverbs.MR
	budget   int // maxInFlight from the driver
	inFlight int
	failed   bool // the device refused it: its frames are copied
	released bool
}

// RegisterMemory implements driver.MemoryRegistrar: b is registered with
// the device at the first Send once the endpoint is set up (a publication
// may exist before SIDR resolved its subscription, and the PD comes with
// the resolved id), and then its datagrams go out without a copy while
// fewer than maxInFlight of its bytes are posted and not completed (the
// driver's bound against its cleaning, see driver.MemoryRegistrar). The
// driver calls this before the sender agent uses the transport, and the
// release func after the sender let go of it.
func (t *transport) RegisterMemory(b []byte, maxInFlight int) (func() error, error) {
	if len(b) == 0 {
		return nil, errors.New("ib: register memory: empty buffer")
	}
	// The likeliest refusal, checked now so the driver records it in its
	// error log with the fix; the frames are then copied.
	if err := uverbs.CheckMemlock(len(b)); err != nil {
		return nil, fmt.Errorf("ib: register a publication log of %d bytes: %w", len(b), err)
	}
	r := &memReg{b: b, budget: max(maxInFlight, 1)}
	t.regs = append(t.regs, r)
	t.regsPending = true
	return func() error { return t.unregister(r) }, nil
}

// registerPending registers the regions not registered yet; a refusal is
// counted and leaves the region to the bounce buffer.
func (t *transport) registerPending() {
	t.regsPending = false
	for _, r := range t.regs {
		if r.mr != nil || r.failed || r.released {
			continue
		}
		// local read access only: the device gathers sends from it
		mr, err := t.ep.PD().RegMR(r.b, 0)
		if err != nil {
			r.failed = true
			t.m.RegisterErrors.Add(1)
			continue
		}
		r.mr = mr
	}
}

// registered returns the region d lies in and the SGE naming it, or nil
// when d is not in registered memory or its region's in-flight bound
// would be exceeded (a single datagram is allowed when none is in flight:
// the driver's mtu is at most a term/8).
func (t *transport) registered(d []byte) (*memReg, uverbs.SGE) {
	for _, r := range t.regs {
		if r.mr == nil {
			continue
		}
		if sge, ok := r.mr.SGEOf(d); ok {
			if r.inFlight > 0 && r.inFlight+len(d) > r.budget {
				return nil, uverbs.SGE{}
			}
			return r, sge
		}
	}
	return nil, uverbs.SGE{}
}

// quiesce polls the CQ until no posted send reads r, for at most
// QuiesceTimeout. Receive completions met meanwhile wait for Recv.
func (t *transport) quiesce(r *memReg) error {
	if r.inFlight == 0 || !t.ready.Load() {
		return nil
	}
	end := time.Now().Add(QuiesceTimeout)
	for r.inFlight > 0 {
		if err := t.reap(); err != nil {
			return err
		}
		if r.inFlight > 0 && time.Now().After(end) {
			return fmt.Errorf("ib: %d bytes of a registered log still in posted sends after %v", r.inFlight, QuiesceTimeout)
		}
	}
	return nil
}

// unregister is the release func of RegisterMemory: wait for the sends
// reading r, then deregister it. Deregistering with sends still posted
// (the wait timed out) is still safe for memory: the device then fails
// those sends with a protection error instead of reading the pages, which
// stay pinned until the MR is gone.
func (t *transport) unregister(r *memReg) error {
	if r.released {
		return nil
	}
	r.released = true
	err := t.quiesce(r)
	if r.mr != nil {
		err = errors.Join(err, r.mr.Close())
		r.mr = nil
	}
	for i, x := range t.regs {
		if x == r {
			t.regs = append(t.regs[:i], t.regs[i+1:]...)
			break
		}
	}
	for s := range t.slotReg {
		if t.slotReg[s] == r {
			t.slotReg[s] = nil
		}
	}
	return err
}

// unregisterAll releases every region still registered (Close, before the
// endpoint and its PD go).
func (t *transport) unregisterAll() error {
	var errs []error
	for len(t.regs) > 0 {
		errs = append(errs, t.unregister(t.regs[0]))
	}
	return errors.Join(errs...)
}

// dropRegistrations deregisters every region from the endpoint about to be
// released by a re-resolution (resolve.go): the MRs belong to its PD, and
// the next endpoint registers them again with its own at its first Send.
// Sends still posted from them go with the old QP, so nothing is in
// flight any more.
func (t *transport) dropRegistrations() error {
	var errs []error
	for _, r := range t.regs {
		if r.mr != nil {
			errs = append(errs, r.mr.Close())
			r.mr = nil
		}
		r.inFlight = 0
		if !r.failed && !r.released {
			t.regsPending = true
		}
	}
	clear(t.slotReg[:])
	t.unsignalledReg = false
	return errors.Join(errs...)
}
