package client_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
)

// imageLog records image events by subscription registration id.
type imageLog struct {
	mu        sync.Mutex
	available map[int64][]int64
	gone      map[int64][]int64
}

func newImageLog() *imageLog {
	return &imageLog{available: map[int64][]int64{}, gone: map[int64][]int64{}}
}

func (l *imageLog) onAvailable(img *client.Image) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.available[img.Subscription().RegistrationID()] = append(l.available[img.Subscription().RegistrationID()], img.CorrelationID())
}

func (l *imageLog) onUnavailable(img *client.Image) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone[img.Subscription().RegistrationID()] = append(l.gone[img.Subscription().RegistrationID()], img.CorrelationID())
}

func (l *imageLog) counts(reg int64) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.available[reg]), len(l.gone[reg])
}

// TestPerSubscriptionImageHandlers: a subscription added with its own
// handlers hears of its images there and only there; another subscription
// of the same stream falls back to the client-wide handlers; an image that
// exists before the subscription is announced too (the handlers are in
// place before the driver answers).
func TestPerSubscriptionImageHandlers(t *testing.T) {
	d := startDriver(t, testConfig(t))
	global, own, late := newImageLog(), newImageLog(), newImageLog()
	c := connect(t, d.Dir(), func(o *client.Options) {
		o.OnAvailableImage, o.OnUnavailableImage = global.onAvailable, global.onUnavailable
	})
	ctx := context.Background()
	withHandlers, err := c.AddSubscriptionWithHandlers(ctx, "aeron:ipc", 9, own.onAvailable, own.onUnavailable)
	require.NoError(t, err)
	plain, err := c.AddSubscription(ctx, "aeron:ipc", 9)
	require.NoError(t, err)
	pub, err := c.AddPublication(ctx, "aeron:ipc", 9)
	require.NoError(t, err)
	waitFor(t, "both images", func() bool { return withHandlers.ImageCount() == 1 && plain.ImageCount() == 1 })
	lateSub, err := c.AddSubscriptionWithHandlers(ctx, "aeron:ipc", 9, late.onAvailable, nil)
	require.NoError(t, err)
	waitFor(t, "the late subscription's image", func() bool { return lateSub.ImageCount() == 1 })

	waitFor(t, "available events", func() bool {
		a1, _ := own.counts(withHandlers.RegistrationID())
		a2, _ := global.counts(plain.RegistrationID())
		a3, _ := late.counts(lateSub.RegistrationID())
		return a1 == 1 && a2 == 1 && a3 == 1
	})
	a, _ := global.counts(withHandlers.RegistrationID())
	require.Zero(t, a, "the client-wide handler is not told of an image whose subscription has its own")
	a, _ = own.counts(plain.RegistrationID())
	require.Zero(t, a, "a subscription's own handler hears of its images only")
	a, _ = global.counts(lateSub.RegistrationID())
	require.Zero(t, a)

	require.NoError(t, pub.Close())
	waitFor(t, "unavailable events", func() bool {
		_, g1 := own.counts(withHandlers.RegistrationID())
		_, g2 := global.counts(plain.RegistrationID())
		_, g3 := global.counts(lateSub.RegistrationID())
		return g1 == 1 && g2 == 1 && g3 == 1
	})
	_, g := global.counts(withHandlers.RegistrationID())
	require.Zero(t, g)
	_, g = late.counts(lateSub.RegistrationID())
	require.Zero(t, g, "a nil own handler falls back to the client-wide one")
}
