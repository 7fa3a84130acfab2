//go:build race

package mlx5

import (
	"runtime"
	"unsafe"
)

// The device orders a post before the poll that retires it: post writes
// wr_id, rings the doorbell; the HCA writes a CQE; poll sees the CQE and
// reads wr_id. The race detector cannot see that edge through the device,
// so race builds tell it (normal builds compile these to nothing).
func racePosted(p unsafe.Pointer)  { runtime.RaceReleaseMerge(p) }
func raceRetired(p unsafe.Pointer) { runtime.RaceAcquire(p) }
