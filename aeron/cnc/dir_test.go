package cnc

import (
	"os"
	"os/user"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDefaultDir: $USER names the directory when set; without it, as in
// most containers, the password entry of the uid does (as the C client),
// not "root" or "default" by accident; $AERON_DIR overrides both in Dir.
func TestDefaultDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the /dev/shm default is Linux's")
	}
	t.Setenv("AERON_DIR", "")
	t.Setenv("USER", "alice")
	require.Equal(t, "/dev/shm/aeron-alice", DefaultDir())
	require.Equal(t, "/dev/shm/aeron-alice", Dir())

	require.NoError(t, os.Unsetenv("USER")) // t.Setenv restores it
	want := "default"
	if u, err := user.Current(); err == nil && u.Username != "" {
		want = u.Username
	}
	require.Equal(t, "/dev/shm/aeron-"+want, DefaultDir())

	t.Setenv("AERON_DIR", "/tmp/elsewhere")
	require.Equal(t, "/tmp/elsewhere", Dir())
	require.Equal(t, "/dev/shm/aeron-"+want, DefaultDir(), "the default does not read AERON_DIR")
}
