package driver

import (
	"fmt"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// The lifecycles of publications and images follow the C driver's
// (aeron_ipc_publication.c, aeron_network_publication.c,
// aeron_publication_image.c); docs/aeron.md lists each transition and its
// condition. The states:
//
//	publication: ACTIVE -> DRAINING (the last client let go)
//	             -> LINGER (drained: every byte sent, or nobody left to
//	                send it to) -> DONE (linger over, or a unicast EOS SM)
//	image:       ACTIVE -> DRAINING (end of stream consumed up to rcv-hwm,
//	             publisher silent for the liveness timeout, or no working
//	             subscriber) -> DONE (every subscriber read to rcv-pos and
//	             EOS status messages went out for 5 SM timeouts: the
//	             subscribers get ON_UNAVAILABLE_IMAGE and the receiver
//	             drops the image; C's LINGER is the wait for that release)
//
// Data that cannot be delivered (a drain whose receivers left, an image
// whose publisher went silent) is never lost quietly: the driver counts it
// (sysPublicationsEndedShort, sysImagesEndedShort) and writes what and
// where to the error log.

func (s pubState) String() string {
	switch s {
	case pubActive:
		return "ACTIVE"
	case pubDraining:
		return "DRAINING"
	case pubLinger:
		return "LINGER"
	case pubDone:
		return "DONE"
	}
	return fmt.Sprintf("pubState(%d)", int(s))
}

func (s imageState) String() string {
	switch s {
	case imageActive:
		return "ACTIVE"
	case imageDraining:
		return "DRAINING"
	case imageDone:
		return "DONE"
	}
	return fmt.Sprintf("imageState(%d)", int(s))
}

// unblockLog mirrors aeron_logbuffer_unblocker_unblock: a claim that was
// never committed at blockedPosition (its publisher died between claim and
// commit) is turned into padding, or the log rotated past it, so that the
// rest of the log can be consumed. It reports whether it did anything.
func unblockLog(log *logbuffer.LogBuffer, hw *logbuffer.HeaderWriter, termLength int64, positionBitsToShift int, blockedPosition int64) bool {
	m := log.Metadata()
	termCount := m.ActiveTermCount()
	expectedTermCount := int32(blockedPosition >> positionBitsToShift)
	idx := logbuffer.IndexByTermCount(int64(expectedTermCount))
	raw := m.RawTailVolatile(idx)
	termID := logbuffer.TermID(raw)
	tailOffset := logbuffer.TermOffset(raw, int32(termLength))
	blockedOffset := int32(blockedPosition & (termLength - 1))
	if termCount == expectedTermCount-1 && blockedOffset == 0 {
		current := logbuffer.TermID(m.RawTailVolatile(logbuffer.IndexByTermCount(int64(termCount))))
		return m.RotateLog(termCount, current)
	}
	st := logbuffer.Unblock(hw, log.Term(idx), blockedOffset, tailOffset, termID)
	if st == logbuffer.UnblockedToEnd {
		m.RotateLog(termCount, termID)
	}
	return st != logbuffer.NoAction
}

// possiblyBlocked is aeron_*_publication_is_possibly_blocked: the producer
// is past the consumer, or in another term than the consumer's.
func possiblyBlocked(log *logbuffer.LogBuffer, positionBitsToShift int, producer, consumer int64) bool {
	if log.Metadata().ActiveTermCount() != int32(consumer>>positionBitsToShift) {
		return true
	}
	return producer > consumer
}

// blockedCheck is the conductor's watch over a non-exclusive publication's
// consumer position (aeron_*_publication_check_for_blocked_publisher): a
// consumer that has not moved for the unblock timeout while the log is
// possibly blocked gets the log unblocked at its position.
type blockedCheck struct {
	lastPos   int64
	lastMoved int64
}

// due reports whether the log should be unblocked at consumer now.
func (b *blockedCheck) due(nowNs, timeoutNs int64, blocked bool, consumer int64) bool {
	if consumer == b.lastPos && blocked {
		return nowNs > b.lastMoved+timeoutNs
	}
	b.lastPos, b.lastMoved = consumer, nowNs
	return false
}

// publicationEndedShort records a publication that ended with bytes its
// receivers never got: counted, and in the error log with what and where.
func (c *conductor) publicationEndedShort(regID int64, sessionID, streamID int32, channel string, sent, produced int64, why string) {
	c.sys[sysPublicationsEndedShort].Add(1)
	c.recordError(cnc.ErrorCodeGenericError, fmt.Sprintf(
		"publication %d session %d stream %d %s: ended with %d bytes unsent (sent to position %d of %d): %s",
		regID, sessionID, streamID, channel, produced-sent, sent, produced, why))
}

// imageEndedShort records an image that ended without its publisher's end
// of stream: what the subscribers got is all they will get.
func (c *conductor) imageEndedShort(im *publicationImage, why string) {
	if im.endedShort {
		return // counted once
	}
	im.endedShort = true
	c.sys[sysImagesEndedShort].Add(1)
	hwm, rcv := im.hwm.Load(), im.rcvPos.Load()
	gap := ""
	if hwm > rcv {
		gap = fmt.Sprintf(", %d bytes behind a gap never filled", hwm-rcv)
	}
	c.recordError(cnc.ErrorCodeGenericError, fmt.Sprintf(
		"image %d session %d stream %d from %s: ended without end of stream at position %d%s: %s",
		im.regID, im.sessionID, im.streamID, im.sourceIdentity, rcv, gap, why))
}

// reportInFlightAtShutdown counts and logs what a driver shutting down
// leaves undelivered: network publications whose sender is behind the
// producer, IPC publications and images a subscriber has not read to the
// end.
func (c *conductor) reportInFlightAtShutdown() {
	const why = "the driver shut down"
	for _, p := range c.netPubs {
		if p.state == pubActive || p.state == pubDraining {
			if sent, produced := p.sndPos.Load(), p.producerPosition(); sent < produced {
				c.publicationEndedShort(p.regID, p.sessionID, p.streamID, p.channel, sent, produced, why)
			}
		}
	}
	for _, p := range c.pubs {
		if p.state != pubActive && p.state != pubDraining {
			continue
		}
		produced := p.producerPosition()
		for _, sp := range p.subs.positions {
			if read := sp.pos.Load(); sp.state != tetherResting && read < produced {
				c.publicationEndedShort(p.regID, p.sessionID, p.streamID, p.channel, read, produced,
					fmt.Sprintf("%s before subscription %d read it", why, sp.sub.regID))
				break
			}
		}
	}
	for _, e := range c.endpoints {
		for _, im := range e.images {
			if im.state != imageDone && !im.drained() {
				c.imageEndedShort(im, why+" before every subscriber read it")
			}
		}
	}
}
