//go:build linux

package shm

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// threadFaults is this thread's minor page faults so far.
func threadFaults(t *testing.T) int64 {
	var ru unix.Rusage
	require.NoError(t, unix.Getrusage(unix.RUSAGE_THREAD, &ru))
	return ru.Minflt
}

// writeEveryPage writes one byte of every page of b (a value that is
// already there) and returns the minor faults that took.
func writeEveryPage(t *testing.T, b []byte) int64 {
	page := os.Getpagesize()
	before := threadFaults(t)
	for off := 0; off < len(b); off += page {
		b[off+1] = byte(off / page)
	}
	return threadFaults(t) - before
}

// PreTouch leaves no first-touch page fault for a hot loop to take, and
// changes no data: the words it swaps hold what another mapping wrote,
// zero or not.
func TestPreTouch(t *testing.T) {
	runtime.LockOSThread() // the fault counts are this thread's
	defer runtime.UnlockOSThread()
	// tmpfs, where a log lives: a disk file's pages can be write-protected
	// again by writeback between the pre-touch and the count
	dir, err := os.MkdirTemp("/dev/shm", "ibgo-pretouch-")
	if err != nil {
		t.Skipf("no writable /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const size = 16 << 20
	page := os.Getpagesize()
	pages := size / page
	path := filepath.Join(dir, "log")
	w, err := CreateAllocated(path, size)
	require.NoError(t, err)
	defer w.Close()
	for off := 0; off < size; off += page {
		b := w.Bytes()
		b[off+1] = byte(off / page) // what writeEveryPage writes back
		if off/page%3 == 0 {
			StoreInt32(b, off+4, int32(off/page)+1) // non-zero words beside zero ones
		}
	}
	StoreInt32(w.Bytes(), 0, 7) // a page's first word not zero: the swap fails, nothing changes
	want := append([]byte(nil), w.Bytes()...)

	cold, err := Map(path, true)
	require.NoError(t, err)
	defer cold.Close()
	faults := writeEveryPage(t, cold.Bytes())
	require.GreaterOrEqual(t, faults, int64(pages/2), "a fresh mapping faults on first writes (%d pages)", pages)

	warm, err := Map(path, true)
	require.NoError(t, err)
	defer warm.Close()
	require.NoError(t, warm.PreTouch())
	faults = writeEveryPage(t, warm.Bytes())
	require.Less(t, faults, int64(pages/16), "after PreTouch, first writes of %d pages took %d faults", pages, faults)
	require.True(t, bytes.Equal(want, warm.Bytes()), "PreTouch changed data")

	// The loop alone (kernels without MADV_POPULATE_WRITE) does the same.
	loop, err := Map(path, true)
	require.NoError(t, err)
	defer loop.Close()
	preTouch(loop.Bytes())
	faults = writeEveryPage(t, loop.Bytes())
	require.Less(t, faults, int64(pages/16), "after the swap loop, first writes of %d pages took %d faults", pages, faults)
	require.True(t, bytes.Equal(want, loop.Bytes()), "the swap loop changed data")

	require.NoError(t, (&Mapping{}).PreTouch()) // an empty mapping is left alone
}
