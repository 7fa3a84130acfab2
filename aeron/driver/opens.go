package driver

import "sync"

// backgroundOpens runs the Opens of media that may wait on the fabric
// (BackgroundOpener) on goroutines of their own and hands each result to
// the conductor, which applies it in its duty cycle (drain), so that the
// conductor never waits for an address resolution, a connection or a
// join. After close, a result that arrives is closed where it lands: the
// driver is gone. start and drain are the conductor's; the goroutines
// touch only the queue, under mu.
type backgroundOpens struct {
	mu     sync.Mutex
	done   []func()
	closed bool
}

// start runs open on a goroutine; its result goes to apply on the
// conductor.
func (b *backgroundOpens) start(open func() (Transport, error), apply func(Transport, error)) {
	go func() {
		t, err := open()
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
// hold transports to release), later ones close their transport.
func (b *backgroundOpens) close() int {
	n := b.drain()
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return n + b.drain()
}
