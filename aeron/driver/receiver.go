package driver

import (
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/protocol"
)

// Receiver timings of the C driver (aeron_driver_context.c, aeron_loss_detector.h).
const (
	nakUnicastDelayNs        = 100_000 // AERON_NAK_UNICAST_DELAY_DEFAULT_NS
	nakUnicastRetryRatio     = 100     // AERON_NAK_UNICAST_RETRY_DELAY_RATIO_DEFAULT
	pendingSetupTimeoutNs    = 1_000_000_000
	receivePollPerDuty       = 32
	imageEOSStatusMessages   = 5
	maxPendingSetupEndpoints = 64
)

// receiver is the receiver agent (aeron_driver_receiver.c): it reads the
// endpoints' datagrams into images and sends the status messages and NAKs
// the conductor schedules. Owned by the goroutine that runs it.
type receiver struct {
	cmds        *proxy
	toConductor *proxy
	c           *conductor // target of toConductor commands, and recordError (safe from any agent)
	endpoints   []*receiveEndpoint
	sys         []*atomic.Int64
	nowNs       int64
	cycle       cycleTracker
}

// doWork is one receiver duty cycle (aeron_driver_receiver_do_work).
func (r *receiver) doWork() int {
	r.nowNs = time.Now().UnixNano()
	work := r.cmds.drain()
	for _, e := range r.endpoints {
		work += e.poll(r)
	}
	r.cycle.record(r.nowNs)
	return work
}

func (r *receiver) onAddEndpoint(e *receiveEndpoint) {
	e.r = r
	r.endpoints = append(r.endpoints, e)
}

// onRemoveEndpoint drops the endpoint and closes its transport; the
// conductor has removed its images before (commands run in order).
func (r *receiver) onRemoveEndpoint(e *receiveEndpoint) {
	for i, x := range r.endpoints {
		if x == e {
			r.endpoints = append(r.endpoints[:i], r.endpoints[i+1:]...)
			break
		}
	}
	for _, im := range e.rimages {
		im.ungrant() // before the log may go
		im.released.Store(true)
	}
	e.rimages = nil
	if e.t != nil {
		_ = e.t.Close()
	}
	for _, d := range e.rdests {
		_ = d.t.Close()
		d.released.Store(true)
	}
	e.rdests = nil
	e.released.Store(true)
}

func (r *receiver) onAddSubscription(e *receiveEndpoint, s *subLink) {
	e.rsubs = append(e.rsubs, s)
}

func (r *receiver) onRemoveSubscription(e *receiveEndpoint, s *subLink) {
	for i, x := range e.rsubs {
		if x == s {
			e.rsubs = append(e.rsubs[:i], e.rsubs[i+1:]...)
			return
		}
	}
}

// onAddImage starts receiving into a new image and answers its SETUP with
// the status message the conductor scheduled: this is what connects the
// publication.
func (r *receiver) onAddImage(e *receiveEndpoint, im *publicationImage) {
	delete(e.creating, [2]int32{im.sessionID, im.streamID})
	delete(e.pendingSetup, [2]int32{im.sessionID, im.streamID})
	e.rimages = append(e.rimages, im)
	if g, ok := e.t.(ImageGranter); ok && !e.mds {
		// a peer that asked may place its frames in the terms itself
		// (aeron:ib ib-mode=write); the grant goes out before the status
		// message that connects the publication
		if revoke, ok := g.GrantImage(ImageGrant{From: im.source, SessionID: im.sessionID, StreamID: im.streamID,
			InitialTermID: im.initialTermID, TermLength: int32(im.termLength), Position: im.hwmPosition,
			Terms: im.log.Bytes()[:3*im.termLength], Rebuilt: im.rcvPos.Load}); ok {
			im.revokeGrant = revoke
		}
	}
	im.sendPending(r)
}

// onRemoveImage stops receiving into the image and tells the sender this
// receiver is going away (an SM with the EOS flag).
func (r *receiver) onRemoveImage(e *receiveEndpoint, im *publicationImage) {
	for i, x := range e.rimages {
		if x == im {
			e.rimages = append(e.rimages[:i], e.rimages[i+1:]...)
			sm := protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: protocol.SMFlagEOS}, SessionID: im.sessionID, StreamID: im.streamID,
				ReceiverID: im.receiverID, GroupTag: e.groupTag, HasGroupTag: e.hasGroupTag}
			n, _ := sm.Encode(im.ctl[:])
			im.sendControl(r, im.ctl[:n])
			break
		}
	}
	im.ungrant()
	im.released.Store(true)
}

// ungrant ends the image's grant (ImageGranter), if it has one: no peer
// writes into its terms afterwards. Receiver.
func (im *publicationImage) ungrant() {
	if im.revokeGrant != nil {
		im.revokeGrant()
		im.revokeGrant = nil
	}
}
