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

// regions are the logs the driver registered with one transport (UD or
// RC), in the order it registered them. Owned by the transport's agent.
type regions struct {
	regs        []*memReg
	regsPending bool       // a region waits for registerPending
	regsPD      *uverbs.PD // the PD the last registerPending used (nil after deregisterAll)
}

// add takes b for registration at the next registerPending (see
// driver.MemoryRegistrar).
func (rs *regions) add(b []byte, maxInFlight int) (*memReg, error) {
	if len(b) == 0 {
		return nil, errors.New("ib: register memory: empty buffer")
	}
	// The likeliest refusal, checked now so the driver records it in its
	// error log with the fix; the frames are then copied.
	if err := uverbs.CheckMemlock(len(b)); err != nil {
		return nil, fmt.Errorf("ib: register a publication log of %d bytes: %w", len(b), err)
	}
	r := &memReg{b: b, budget: max(maxInFlight, 1)}
	rs.regs = append(rs.regs, r)
	rs.regsPending = true
	return r, nil
}

// registerPending registers the regions not registered yet with pd; a
// refusal is counted in m and leaves the region to the bounce buffer.
func (rs *regions) registerPending(pd *uverbs.PD, m *Media) {
	rs.regsPending = false
	rs.regsPD = pd
	for _, r := range rs.regs {
		if r.mr != nil || r.failed || r.released {
			continue
		}
		// local read access only: the device gathers sends from it
		mr, err := pd.RegMR(r.b, 0)
		if err != nil {
			r.failed = true
			m.RegisterErrors.Add(1)
			continue
		}
		r.mr = mr
	}
}

// registered returns the region d lies in and the SGE naming it, or nil
// when d is not in registered memory or its region's in-flight bound
// would be exceeded (a single datagram is allowed when none is in flight:
// the driver's mtu is at most a term/8).
func (rs *regions) registered(d []byte) (*memReg, uverbs.SGE) {
	for _, r := range rs.regs {
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

// remove deregisters r and forgets it; the caller has waited for the sends
// reading it (or given up waiting).
func (rs *regions) remove(r *memReg) error {
	var err error
	if r.mr != nil {
		err = r.mr.Close()
		r.mr = nil
	}
	for i, x := range rs.regs {
		if x == r {
			rs.regs = append(rs.regs[:i], rs.regs[i+1:]...)
			break
		}
	}
	return err
}

// movedTo reports whether pd is another PD than the one the regions were
// last registered on and, when it is, deregisters them all, so that the
// next registerPending registers them on pd: the device under the old PD
// was removed. A nil pd, or regions not registered, are not a move.
func (rs *regions) movedTo(pd *uverbs.PD) bool {
	if rs.regsPD == nil || pd == nil || pd == rs.regsPD {
		return false
	}
	_ = rs.deregisterAll()
	return true
}

// deregisterAll closes every region's MR and keeps the regions for the
// next registerPending (with a new PD): the endpoint they were registered
// on is going, and with it every send that read them.
func (rs *regions) deregisterAll() error {
	rs.regsPD = nil
	var errs []error
	for _, r := range rs.regs {
		if r.mr != nil {
			errs = append(errs, r.mr.Close())
			r.mr = nil
		}
		r.inFlight = 0
		if !r.failed && !r.released {
			rs.regsPending = true
		}
	}
	return errors.Join(errs...)
}

// slotRegs say, for each send slot of a send queue, which region and how
// many bytes of it the work request in the slot reads until its
// completion frees the slot. Owned by the transport's agent.
type slotRegs struct {
	reg []*memReg
	n   []int
	// unsignalled: a posted work request reading a registered region has
	// no signalled one after it yet
	unsignalled bool
}

func newSlotRegs(slots int) slotRegs {
	return slotRegs{reg: make([]*memReg, slots), n: make([]int, slots)}
}

// take records that slot's work request reads n bytes of r. It reports
// whether that work request should be signalled now: r has half its
// in-flight bound posted, so its count must come down soon or its next
// frames are copied (large frames reach the bound long before the
// signalEvery'th work request).
func (s *slotRegs) take(slot int, r *memReg, n int) bool {
	r.inFlight += n
	s.reg[slot], s.n[slot] = r, n
	s.unsignalled = true
	return 2*r.inFlight >= r.budget
}

// free ends slot's read of its region (its work request completed, or was
// never posted).
func (s *slotRegs) free(slot int) {
	if r := s.reg[slot]; r != nil {
		r.inFlight -= s.n[slot]
		s.reg[slot] = nil
	}
}

// post posts wrs with one doorbell on qp, the last one signalled when a
// work request reading a registered region has no signalled one after it
// yet (its count must come down), and clears the work requests' references
// to the driver's memory. The caller gives back the slots of the ones the
// provider refused (wrs[n:]).
func (s *slotRegs) post(qp *uverbs.QP, wrs []uverbs.SendWR) (int, error) {
	if s.unsignalled {
		wrs[len(wrs)-1].Flags |= uverbs.SendSignaled
		s.unsignalled = false
	}
	n, err := qp.PostSend(wrs)
	if n < len(wrs) && n > 0 {
		s.unsignalled = true // the signalled last one may not be among them
	}
	for j := range wrs { // keep no reference to the driver's memory
		wrs[j].InlineData, wrs[j].SGL = nil, nil
	}
	return n, err
}

// freeAll ends every slot's read: the queue pair is gone or restarted, so
// the device reads none of them any more.
func (s *slotRegs) freeAll() {
	for i := range s.reg {
		s.free(i)
	}
	s.unsignalled = false
}

// forget drops the slots' references to r (released: its count no longer
// matters).
func (s *slotRegs) forget(r *memReg) {
	for i := range s.reg {
		if s.reg[i] == r {
			s.reg[i] = nil
		}
	}
}

// fillSend makes wr (its WRID and opcode set) carry d from send slot slot
// of a send queue: inline when d fits the QP's inline data, else straight
// from a registered log (s records the read), else copied into the slot's
// bounce buffer at mem[off:], registered as mr. sgl is wr's one SGE. One
// work request in signalEvery is signalled, and one whose log has half its
// in-flight bound posted. UD and RC send paths share it.
func (m *Media) fillSend(wr *uverbs.SendWR, sgl []uverbs.SGE, d []byte, slot, inline int, rs *regions, s *slotRegs, mem []byte, mr *uverbs.MR, off int) {
	switch r, sge := rs.registered(d); {
	case len(d) <= inline:
		wr.InlineData, wr.Flags = d, uverbs.SendInline
		m.Inline.Add(1)
	case r != nil:
		sgl[0] = sge
		wr.SGL = sgl
		if s.take(slot, r, len(d)) {
			wr.Flags |= uverbs.SendSignaled
			s.unsignalled = false
		}
		m.ZeroCopy.Add(1)
	default:
		copy(mem[off:], d)
		sgl[0] = mr.SGE(off, len(d))
		wr.SGL = sgl
		m.Copied.Add(1)
	}
	if slot%signalEvery == signalEvery-1 {
		wr.Flags |= uverbs.SendSignaled
		s.unsignalled = false
	}
}

// quiesceWith calls reap until no posted send reads r, for at most
// QuiesceTimeout.
func quiesceWith(r *memReg, reap func() error) error {
	end := time.Now().Add(QuiesceTimeout)
	for r.inFlight > 0 {
		if err := reap(); err != nil {
			return err
		}
		if r.inFlight > 0 && time.Now().After(end) {
			return fmt.Errorf("ib: %d bytes of a registered log still in posted sends after %v", r.inFlight, QuiesceTimeout)
		}
	}
	return nil
}

// ---- UD transports

// RegisterMemory implements driver.MemoryRegistrar: b is registered with
// the device at the first Send once the endpoint is set up (a publication
// may exist before SIDR resolved its subscription, and the PD comes with
// the resolved id), and then its datagrams go out without a copy while
// fewer than maxInFlight of its bytes are posted and not completed (the
// driver's bound against its cleaning, see driver.MemoryRegistrar). The
// driver calls this before the sender agent uses the transport, and the
// release func after the sender let go of it.
func (t *transport) RegisterMemory(b []byte, maxInFlight int) (func() error, error) {
	r, err := t.add(b, maxInFlight)
	if err != nil {
		return nil, err
	}
	return func() error { return t.unregister(r) }, nil
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
	var err error
	if r.inFlight > 0 && t.ready.Load() {
		// receive completions met meanwhile wait for Recv
		err = quiesceWith(r, t.reap)
	}
	err = errors.Join(err, t.remove(r))
	t.slots.forget(r)
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
	err := t.deregisterAll()
	clear(t.slots.reg)
	t.slots.unsignalled = false
	return err
}
