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
