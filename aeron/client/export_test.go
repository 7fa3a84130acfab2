package client

// OnConductorPinned runs f on the pinned conductor's thread right after
// pinning (nil stops it).
func OnConductorPinned(f func(cpu int)) {
	if f == nil {
		conductorPinned.Store(nil)
		return
	}
	conductorPinned.Store(&f)
}

// EnvBool is envBool.
func EnvBool(v string, def bool) bool { return envBool(v, def) }

// PreTouching reports whether the client pre-touches the logs it maps.
func (c *Client) PreTouching() bool { return c.opts.PreTouchMappedMemory }
