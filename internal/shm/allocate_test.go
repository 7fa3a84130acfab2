//go:build linux

package shm

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// CreateAllocated reserves the file's blocks (a full /dev/shm is then an
// error at creation, not a SIGBUS at a later write); Create leaves it
// sparse.
func TestCreateAllocatedReservesBlocks(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	blocks := func(p string) int64 {
		st, err := os.Stat(p)
		require.NoError(t, err)
		return st.Sys().(*syscall.Stat_t).Blocks * 512
	}
	m, err := Create(filepath.Join(dir, "sparse"), size)
	require.NoError(t, err)
	defer m.Close()
	require.Less(t, blocks(filepath.Join(dir, "sparse")), int64(size), "Create is sparse")
	a, err := CreateAllocated(filepath.Join(dir, "allocated"), size)
	require.NoError(t, err)
	defer a.Close()
	if blocks(filepath.Join(dir, "allocated")) == 0 {
		t.Skip("the file system of the temporary directory has no fallocate")
	}
	require.GreaterOrEqual(t, blocks(filepath.Join(dir, "allocated")), int64(size))
	require.Len(t, a.Bytes(), size)
}
