//go:build !race

package mlx5

import "unsafe"

// See race.go.
func racePosted(unsafe.Pointer)  {}
func raceRetired(unsafe.Pointer) {}
