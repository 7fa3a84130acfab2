package uverbs

// Test hooks: force the legacy paths so the VM tier proves them against the
// real kernel too.

// ForceWritePath makes c send every command through write(2): no
// INVOKE_WRITE, and every ioctl method it would fall back from is marked as
// refused.
func ForceWritePath(c *Context, objectMethods ...[2]uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.useIoctlWrite = false
	for _, om := range objectMethods {
		c.noIoctl[om] = true
	}
}

// GIDTableSysfs exposes the pre-5.10 GID table path.
func (c *Context) GIDTableSysfs() ([]GIDEntry, error) { return c.gidTableSysfs() }

// OpenLegacy opens d with the legacy write GET_CONTEXT (kernels before 5.6).
func OpenLegacy(d *Device) (*Context, error) {
	forceLegacyGetContext = true
	defer func() { forceLegacyGetContext = false }()
	return d.Open()
}

// SetHandle replaces an object's kernel handle, to make the kernel see an
// invalid one.
func SetHandle(o interface{ base() *object }, h uint32) { o.base().handle = h }

// IoctlRefused lists the ioctl methods c has fallen back from to write.
func IoctlRefused(c *Context) map[[2]uint16]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[[2]uint16]bool{}
	for k, v := range c.noIoctl {
		out[k] = v
	}
	return out
}

// GIDSysfs exposes QueryGID's pre-5.10 path.
func (c *Context) GIDSysfs(port uint8, index int) (GIDEntry, error) {
	return c.gidSysfs("query gid", port, index)
}
