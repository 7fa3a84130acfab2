package driver

import (
	"context"
	"net/netip"
	"sync"
)

// backgroundOpens runs the Opens of media that may wait on the fabric
// (BackgroundOpener) on goroutines of their own and hands each result to
// the conductor, which applies it in its duty cycle (drain), so that the
// conductor never waits for an address resolution, a connection or a
// join. After close, a result that arrives is closed where it lands: the
// driver is gone. start and drain are the conductor's; the goroutines
// touch only the queue, under mu.
type backgroundOpens struct {
	mu      sync.Mutex
	done    []func()
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
}

// start runs open on a goroutine with a context that ends at close; its
// result goes to apply on the conductor.
func (b *backgroundOpens) start(open func(context.Context) (Transport, error), apply func(Transport, error)) {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	b.running.Add(1)
	go func() {
		defer b.running.Done()
		t, err := open(b.ctx)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			if t != nil {
				_ = t.Close()
			}
			return
		}
		b.done = append(b.done, func() { apply(t, err) })
	}()
}

// resolve looks host up on a goroutine; the result goes to apply on the
// conductor (nothing after close).
func (b *backgroundOpens) resolve(host string, apply func(netip.Addr, error)) {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	b.running.Add(1)
	go func() {
		defer b.running.Done()
		a, err := lookupHost(b.ctx, host)
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.closed {
			b.done = append(b.done, func() { apply(a, err) })
		}
	}()
}

// drain applies the results that arrived; the number applied is work.
func (b *backgroundOpens) drain() int {
	b.mu.Lock()
	done := b.done
	b.done = nil
	b.mu.Unlock()
	for _, f := range done {
		f()
	}
	return len(done)
}

// close stops taking results: those that arrived are applied (they may
// hold transports to release), the opens still running are told to stop
// and waited for, and what they give is closed.
func (b *backgroundOpens) close() int {
	n := b.drain()
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	if b.cancel != nil {
		b.cancel()
	}
	b.running.Wait()
	return n + b.drain()
}
