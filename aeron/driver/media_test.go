package driver

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// reportingMedia is a fakeMedia that keeps the error handler Start gives it.
type reportingMedia struct {
	fakeMedia
	mu     sync.Mutex
	report func(error)
}

func (m *reportingMedia) SetErrorHandler(report func(error)) {
	m.mu.Lock()
	m.report = report
	m.mu.Unlock()
}

// TestMediaErrorHandler: an ErrorReporter medium's reports land in the
// distinct error log (once per distinct text, counted) and in the Errors
// system counter, from any goroutine; after Close they are dropped, not
// written into the unmapped log.
func TestMediaErrorHandler(t *testing.T) {
	m := &reportingMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	require.NotNil(t, m.report, "Start gives an ErrorReporter its handler")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.report(errors.New("ib: receive completion in error: local protection error (the receive path was restarted)"))
		}()
	}
	wg.Wait()
	m.report(errors.New("ib: resolve 10.0.0.9:20000 by SIDR: unreachable"))
	m.report(nil) // not an error: nothing recorded

	var texts []string
	var counts []int32
	_, err = cnc.ReadErrorLog(d.cnc.ErrorLogBuffer(), 0, func(o cnc.Observation) {
		texts = append(texts, o.Text)
		counts = append(counts, o.Count)
	})
	require.NoError(t, err)
	require.Len(t, texts, 2, "two distinct errors: %q", texts)
	require.True(t, strings.HasPrefix(texts[0], "ib: receive completion in error"))
	require.Equal(t, int32(4), counts[0])
	require.Equal(t, int32(1), counts[1])
	require.Equal(t, int64(5), d.c.sys[sysErrors].Load())

	require.NoError(t, d.Close())
	m.report(errors.New("after close")) // must not touch the unmapped log
}
