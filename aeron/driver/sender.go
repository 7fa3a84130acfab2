package driver

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// Sender timings of the C driver (aeron_network_publication.h,
// aeron_retransmit_handler.h).
const (
	setupTimeoutNs          = 100_000_000 // AERON_NETWORK_PUBLICATION_SETUP_TIMEOUT_NS
	heartbeatTimeoutNs      = 100_000_000 // AERON_NETWORK_PUBLICATION_HEARTBEAT_TIMEOUT_NS
	retransmitUnicastLinger = 10_000_000  // AERON_RETRANSMIT_UNICAST_LINGER
	maxDatagramsPerSendDuty = 16
	controlPollPerDuty      = 16
)

// sender is the sender agent (aeron_driver_sender.c): the send duty of
// every network publication the conductor handed it. Owned by the goroutine
// that runs it; other agents reach it only through cmds.
type sender struct {
	cmds      *proxy
	endpoints []*sendEndpoint
	pubs      []*networkPublication
	// report records an error in the driver's error log (conductor's
	// recordError, safe from any agent)
	report func(code int, msg string)
	// toConductor carries what the conductor must act on (a publication
	// error); the sender never waits on it (tryOffer)
	toConductor *proxy
	conductor   *conductor // target of toConductor commands only
	sys         []*atomic.Int64
	nowNs       int64
	cycle       cycleTracker
}

// doWork is one sender duty cycle (aeron_driver_sender_do_work).
func (s *sender) doWork() int {
	s.nowNs = time.Now().UnixNano()
	work := s.cmds.drain()
	for _, e := range s.endpoints {
		work += e.poll()
	}
	for _, p := range s.pubs {
		work += p.send(s)
	}
	s.cycle.record(s.nowNs)
	return work
}

// onAddPublication: aeron_driver_sender_on_add_publication.
func (s *sender) onAddPublication(p *networkPublication) {
	p.s = s
	p.lastSetupNs = s.nowNs - setupTimeoutNs
	s.pubs = append(s.pubs, p)
	p.ep.pubs[dispatchKey(p.sessionID, p.streamID)] = p
	if r, ok := p.ep.t.(MemoryRegistrar); ok {
		p.registerLog(s, r)
	}
}

// onRemovePublication: aeron_driver_sender_on_remove_publication; the
// conductor frees the publication once released is set.
func (s *sender) onRemovePublication(p *networkPublication) {
	for i, x := range s.pubs {
		if x == p {
			s.pubs = append(s.pubs[:i], s.pubs[i+1:]...)
			break
		}
	}
	if k := dispatchKey(p.sessionID, p.streamID); p.ep.pubs[k] == p {
		delete(p.ep.pubs, k)
	}
	if p.unregister != nil {
		// no more posts from this log: wait for the ones in flight to
		// complete, then deregister it, before the conductor unmaps it
		if err := p.unregister(); err != nil && s.report != nil {
			s.report(cnc.ErrorCodeGenericError, fmt.Sprintf("publication %d: release registered log: %v", p.regID, err))
		}
		p.unregister = nil
	}
	p.released.Store(true)
}
