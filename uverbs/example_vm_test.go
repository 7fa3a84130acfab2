//go:build linux

package uverbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestExamples runs the package's example, which needs a device, and
// checks what it prints (the unit tier only compiles it).
func TestExamples(t *testing.T) {
	testutil.OneNode(t)
	require.Equal(t, "port 1: PORT_ACTIVE max QPs > 0: true\nreceived \"hello, verbs\"\n", testutil.Stdout(t, Example))
}
