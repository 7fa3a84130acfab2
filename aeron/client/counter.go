package client

import (
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// Counter is a counter this client allocated in the driver's CnC file.
// Its value may be read and written from any goroutine.
type Counter struct {
	client         *Client
	registrationID int64
	id             int32
	value          *atomic.Int64
	static         bool
	closed         atomic.Bool
}

// ID is the counter id (the row in AeronStat).
func (c *Counter) ID() int32 { return c.id }

// RegistrationID is the id the counter was registered with.
func (c *Counter) RegistrationID() int64 { return c.registrationID }

// Value is the counter's value word.
func (c *Counter) Value() *atomic.Int64 { return c.value }

// IsClosed reports whether the counter was removed.
func (c *Counter) IsClosed() bool { return c.closed.Load() }

// Close removes a (non-static) counter.
func (c *Counter) Close() error {
	if c.static || c.closed.Swap(true) {
		return nil
	}
	err := c.client.remove(cnc.CmdRemoveCounter, c.registrationID)
	c.client.mu.Lock()
	delete(c.client.counterz, c.registrationID)
	c.client.mu.Unlock()
	return err
}
