//go:build linux

package perftest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCJunkStatus: only a status outside ibv_wc_status (0..23), either
// sign, counts as the C tool misreading its CQ; a real status does not.
func TestCJunkStatus(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		junk   bool
	}{
		{" Completion with error at client\n Failed status 730817280: wr_id 0 syndrom 0x30303a31\n", true},
		{" Completion with error at client\n Failed status -1410314240: wr_id 0 syndrom 0x30303a31\nscnt=100, ccnt=100\n", true},
		{" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n", false},
		{" Completion with error at client\n Failed status 5: wr_id 3 syndrom 0x0\n", false},
		{" Completion with error at client\n Failed status 23: wr_id 3 syndrom 0x0\n", false},
		{" Completion with error at client\n Failed status 24: wr_id 3 syndrom 0x0\n", true},
		{" Couldn't connect to 10.0.0.1:19001\n", false},
	} {
		assert.Equal(t, tc.junk, cJunkStatus(tc.stderr), "%q", tc.stderr)
	}
}
