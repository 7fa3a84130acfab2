package driver

import (
	"fmt"
	"math"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// subscribable is aeron_driver_subscribable_t: the subscriber positions of
// one image, whether that image is an IPC publication's log (its
// subscribers), a network publication's log (its spies) or a publication
// image (its network subscribers). The conductor owns positions; counted,
// the position counters of the subscribers not resting, is republished
// whenever the set changes, for the sender (spies simulating a connection)
// and the receiver (the window's consumption) to read.
type subscribable struct {
	// image is what ON_AVAILABLE_IMAGE says of the image (correlation id,
	// session, stream, log file, source identity); the subscription
	// fields are filled per subscriber
	image     cnc.ImageReady
	positions []*subscriberPosition
	counted   atomic.Pointer[[]*atomic.Int64]
	// hasCounted says counted is not empty
	hasCounted atomic.Bool
}

type subscriberPosition struct {
	sub *subLink
	id  int32
	pos *atomic.Int64
	// untethered subscriptions (aeron_tetherable_position_t): state and
	// when it last changed or, while active, last kept up
	state        tetherState
	lastUpdateNs int64
}

// link gives subscription s a position at join and tells it the image is
// available (aeron_driver_conductor_link_subscribable).
func (sb *subscribable) link(c *conductor, s *subLink, join int64) error {
	im := &sb.image
	key := streamKey(c.keyBuf, s.regID, im.SessionID, im.StreamID, s.channel)
	id, err := c.counters.Allocate(cnc.TypeSubscriberPosition, key, streamLabel("sub-pos", s.regID, im.SessionID, im.StreamID, s.channel, "@"+strconv.FormatInt(join, 10)))
	if err != nil {
		return err
	}
	c.counters.SetRegistrationID(id, s.regID)
	c.counters.SetOwnerID(id, s.client.id)
	c.counters.SetReferenceID(id, im.CorrelationID)
	sp := &subscriberPosition{sub: s, id: id, pos: c.counters.Value(id), lastUpdateNs: c.nowNs}
	sp.pos.Store(join)
	sb.positions = append(sb.positions, sp)
	sb.publish()
	sb.available(c, sp)
	return nil
}

func (sb *subscribable) available(c *conductor, sp *subscriberPosition) {
	r := sb.image
	r.SubscriptionRegistrationID, r.SubscriberPositionID = sp.sub.regID, sp.id
	c.transmit(cnc.RspOnAvailableImage, cnc.AppendImageReady(c.buf[:0], r))
}

// unlink frees subscription s's position; it says whether s had one.
func (sb *subscribable) unlink(c *conductor, s *subLink) bool {
	for i, sp := range sb.positions {
		if sp.sub == s {
			_ = c.counters.Free(sp.id)
			sb.positions = append(sb.positions[:i], sb.positions[i+1:]...)
			sb.publish()
			return true
		}
	}
	return false
}

// release ends the image for every subscriber: the active ones are told
// (set-aside ones were told when set aside), and all their position
// counters are freed.
func (sb *subscribable) release(c *conductor) {
	for _, sp := range sb.positions {
		if sp.state == tetherActive {
			c.imageGone(sb.image.CorrelationID, sb.image.StreamID, sp)
		}
		_ = c.counters.Free(sp.id)
	}
	sb.positions = nil
	sb.publish()
}

// publish gives the sender or receiver the positions that count.
func (sb *subscribable) publish() {
	ps := make([]*atomic.Int64, 0, len(sb.positions))
	for _, sp := range sb.positions {
		if sp.state != tetherResting {
			ps = append(ps, sp.pos)
		}
	}
	sb.counted.Store(&ps)
	sb.hasCounted.Store(len(ps) > 0)
}

// working is aeron_driver_subscribable_has_working_positions: some
// position not resting counts.
func (sb *subscribable) working() bool {
	for _, sp := range sb.positions {
		if sp.state != tetherResting {
			return true
		}
	}
	return false
}

// reached says every position not resting is at pos or beyond (the
// is_drained and spies_finished_consuming checks).
func (sb *subscribable) reached(pos int64) bool {
	for _, sp := range sb.positions {
		if sp.state != tetherResting && sp.pos.Load() < pos {
			return false
		}
	}
	return true
}

// slowest is pos, or the slowest position not resting if it is behind
// (the join positions of C's publications and images).
func (sb *subscribable) slowest(pos int64) int64 {
	for _, sp := range sb.positions {
		if sp.state != tetherResting {
			pos = min(pos, sp.pos.Load())
		}
	}
	return pos
}

// fastest is pos, or the fastest position not resting if it is ahead.
func (sb *subscribable) fastest(pos int64) int64 {
	for _, sp := range sb.positions {
		if sp.state != tetherResting {
			pos = max(pos, sp.pos.Load())
		}
	}
	return pos
}

// slowestCounted is the slowest position the sender or receiver sees
// counted now, or none when nothing counts. Any goroutine.
func (sb *subscribable) slowestCounted(none int64) int64 {
	ps := sb.counted.Load()
	if ps == nil || len(*ps) == 0 {
		return none
	}
	pos := int64(math.MaxInt64)
	for _, p := range *ps {
		pos = min(pos, p.Load())
	}
	return pos
}

// fastestCounted is pos, or the fastest position counted now if it is
// ahead. Any goroutine.
func (sb *subscribable) fastestCounted(pos int64) int64 {
	if ps := sb.counted.Load(); ps != nil {
		for _, p := range *ps {
			pos = max(pos, p.Load())
		}
	}
	return pos
}

// checkUntethered runs the untethered state machine (checkTether) over the
// subscribers with the window limit limit: a subscriber set aside is told
// the image is unavailable, one that rejoins is put at join() and told it
// is available again. owner names the publication or image in the log.
func (sb *subscribable) checkUntethered(c *conductor, owner string, limit int64, t untetheredTimeouts, join func() int64) {
	changed := checkTether(c.nowNs, sb.positions, limit, t,
		func(sp *subscriberPosition) {
			c.imageGone(sb.image.CorrelationID, sb.image.StreamID, sp)
			fmt.Fprintf(c.log, "%s: untethered subscription %d set aside (linger)\n", owner, sp.sub.regID)
		},
		func(sp *subscriberPosition) {
			pos := join()
			sp.pos.Store(pos)
			sb.available(c, sp)
			fmt.Fprintf(c.log, "%s: untethered subscription %d rejoins at %d\n", owner, sp.sub.regID, pos)
		})
	if changed {
		sb.publish()
	}
}
