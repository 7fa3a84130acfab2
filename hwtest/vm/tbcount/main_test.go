package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A block that runs about -spin times per round trip is a wait in every
// window or in none: counted as work in one window and as a wait in the
// next, it showed as a kernel function one implementation ran and the
// other did not (__rxe_put, 20 times per round trip in both, read as
// 0 against 240 instructions).
func TestWaitBlocksAgreeAcrossWindows(t *testing.T) {
	const post, border, work = 0x1000, 0x2000, 0x3000
	a := []block{{post, 5, 2000}, {border, 6, 19 * 1000}, {work, 9, 5 * 1000}}
	b := []block{{post, 5, 2000}, {border, 6, 21 * 1000}, {work, 9, 5 * 1000}}
	ta, tb := roundTrips(a, post), roundTrips(b, post)
	assert.Equal(t, 1000.0, ta)
	w := waitBlocks([][]block{a, b}, []float64{ta, tb}, 20)
	assert.True(t, w[border], "over spin in one window: a wait in both")
	assert.False(t, w[work], "5 per round trip in both: work")
	assert.False(t, waitBlocks([][]block{a}, []float64{ta}, 20)[border], "19 per round trip alone: work")
}
