//go:build linux

package cm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestExamples runs the package's examples that need a device and checks
// what they print (the unit tier only compiles them).
func TestExamples(t *testing.T) {
	testutil.OneNode(t)
	require.Equal(t, "received \"ping\" (4 bytes)\nreceived \"pong!\" (5 bytes)\n", testutil.Stdout(t, ExampleListenConfig_Listen))
}
