//go:build linux

package sys

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Defect 10: the huge page size comes from the system, not a 2 MiB constant.
func TestHugePageSizeParse(t *testing.T) {
	n, err := parseMeminfoHugepagesize(strings.NewReader("MemTotal:  100 kB\nHugepagesize:    1048576 kB\n"))
	require.NoError(t, err)
	require.Equal(t, 1<<30, n)
	n, err = parseMeminfoHugepagesize(strings.NewReader("Hugepagesize:       2048 kB\n"))
	require.NoError(t, err)
	require.Equal(t, 2<<20, n)
	_, err = parseMeminfoHugepagesize(strings.NewReader("MemTotal: 1 kB\n"))
	require.Error(t, err)
	_, err = parseMeminfoHugepagesize(strings.NewReader("Hugepagesize: x kB\n"))
	require.Error(t, err)
	n, ok := parseHugeDir("hugepages-524288kB")
	require.True(t, ok)
	require.Equal(t, 512<<20, n)
	_, ok = parseHugeDir("other")
	require.False(t, ok)
}

func TestHugePageSizeFromFiles(t *testing.T) {
	dir := t.TempDir()
	old, oldDir := meminfoPath, hugeDir
	t.Cleanup(func() { meminfoPath, hugeDir = old, oldDir })
	meminfoPath = dir + "/none"
	hugeDir = dir
	require.NoError(t, mkdirs(dir+"/hugepages-1048576kB", dir+"/hugepages-32768kB"))
	n, err := HugePageSize()
	require.NoError(t, err)
	require.Equal(t, 32<<20, n, "smallest size from sysfs when meminfo has none")
	hugeDir = dir + "/none"
	_, err = HugePageSize()
	require.ErrorIs(t, err, ErrNotSupported)
	meminfoPath, hugeDir = old, oldDir
	if n, err := HugePageSize(); err == nil {
		require.Greater(t, n, Pagesize)
	}
}

func mkdirs(paths ...string) error {
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}
