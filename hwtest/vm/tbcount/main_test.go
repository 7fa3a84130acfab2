package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// -lines names a pc of the binary by its source line: a pc in this test
// is found in this file, on the line that took it.
func TestGoLinesNamesSourceLine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the running test binary as ELF")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	lineOf, err := goLines(exe)
	require.NoError(t, err)
	pc, file, line, ok := runtime.Caller(0)
	require.True(t, ok)
	assert.Equal(t, filepath.Base(file)+":"+strconv.Itoa(line), lineOf(uint64(pc)))
	assert.Equal(t, "?", lineOf(1), "an address outside the text")
	_, err = goLines(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}
