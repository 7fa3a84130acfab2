package ib

import "time"

// DialBackoffMax bounds the wait between a publication's attempts to
// reach its subscription (a UD publication's SIDR, an ib-qp=rc
// publication's connect) after a failure other than "nobody listens
// there yet": no route, no answer, a refusal. The wait doubles from
// ResolveRetry up to it, and is ResolveRetry again after an attempt that
// found the address alive (a subscription answered, or the peer's CM said
// nobody listens, the normal wait before a subscription starts, as Aeron
// publications send SETUP-less heartbeats until one does). Set it before
// the driver starts.
var DialBackoffMax = 2 * time.Second

// backoff is one dial loop's wait. Owned by that loop.
type backoff struct{ d time.Duration }

// wait is how long to wait before the next attempt.
func (b *backoff) wait() time.Duration {
	if b.d <= 0 {
		return ResolveRetry
	}
	return b.d
}

// failed doubles the wait, up to DialBackoffMax.
func (b *backoff) failed() { b.d = min(2*b.wait(), max(DialBackoffMax, ResolveRetry)) }

// reset makes the next wait ResolveRetry.
func (b *backoff) reset() { b.d = 0 }
