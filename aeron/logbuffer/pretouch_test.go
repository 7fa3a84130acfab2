package logbuffer_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// PreTouch runs its between function after every chunk, so that a client
// keeps its heartbeat going through a large log, and leaves the data as
// it was.
func TestPreTouchChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	const term = 16 << 20
	l, err := logbuffer.Create(path, term, 4096)
	require.NoError(t, err)
	defer l.Close()
	l.Term(1)[100] = 42
	calls := 0
	require.NoError(t, l.PreTouch(func() { calls++ }))
	size := len(l.Bytes())
	require.Equal(t, (size+logbuffer.PreTouchChunk-1)/logbuffer.PreTouchChunk, calls, "one call per %d-byte chunk of %d bytes", logbuffer.PreTouchChunk, size)
	require.Equal(t, byte(42), l.Term(1)[100])
	require.NoError(t, l.PreTouch(nil))

	mem, err := logbuffer.New(make([]byte, int(logbuffer.ComputeLogLength(64<<10, 4096))), 64<<10, 4096)
	require.NoError(t, err)
	require.NoError(t, mem.PreTouch(func() { t.Fatal("a log not mapped from a file is left alone") }))
}
