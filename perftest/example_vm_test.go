//go:build linux

package perftest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestExamples runs the package's examples, which need a device, and
// checks what they print (the unit tier only compiles them).
func TestExamples(t *testing.T) {
	testutil.OneNode(t)
	require.Equal(t, "write_bw client 4096 500 true\n", testutil.Stdout(t, ExampleRun))
}
