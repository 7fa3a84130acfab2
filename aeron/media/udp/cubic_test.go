package udp_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
)

// counterByLabel reads the first counter of a running driver whose label
// starts with prefix.
func counterByLabel(t *testing.T, d *driver.Driver, prefix string) (cnc.Counter, bool) {
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	r, err := f.Counters()
	require.NoError(t, err)
	var out cnc.Counter
	found := false
	r.ForEach(func(c cnc.Counter) bool {
		if strings.HasPrefix(c.Label, prefix) {
			out, found = c, true
			return false
		}
		return true
	})
	return out, found
}

// TestCubicUnderLoss: a cc=cubic subscription with RTT measurement on and
// 5% receive loss gets every message once and in order; it measured the
// round trip with RTTM (rcv-cc-cubic-rtt set) and its window, cut on
// losses, stays within one MTU and half a term.
func TestCubicUnderLoss(t *testing.T) {
	p := connectPair(t, 0.05, "|cc=cubic", func(c *driver.Config) { c.Cubic.MeasureRTT = true })
	p.stream(t, 3000, 256)
	require.Positive(t, systemCounter(t, p.subDriver, "NAKs sent"), "the receiver NAKed the gaps")
	rtt, ok := counterByLabel(t, p.subDriver, "rcv-cc-cubic-rtt:")
	require.True(t, ok, "no rcv-cc-cubic-rtt counter")
	require.Equal(t, int32(cnc.TypePerImage), rtt.TypeID)
	require.Positive(t, rtt.Value, "no round trip measured")
	wnd, ok := counterByLabel(t, p.subDriver, "rcv-cc-cubic-wnd:")
	require.True(t, ok, "no rcv-cc-cubic-wnd counter")
	require.GreaterOrEqual(t, wnd.Value, int64(1408))
	require.LessOrEqual(t, wnd.Value, int64(32<<10))

	// the static default has no cubic counters
	q := connectPair(t, 0, "")
	q.stream(t, 10, 64)
	_, ok = counterByLabel(t, q.subDriver, "rcv-cc-cubic-wnd:")
	require.False(t, ok)
}
