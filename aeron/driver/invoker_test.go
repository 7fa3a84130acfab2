package driver

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
)

// TestInvokerLifecycle: an INVOKER driver's TERMINATE_DRIVER takes effect
// inside the DoWork call that reads it (Terminated closes there, later
// calls do nothing), and Close may race callers of DoWork.
func TestInvokerLifecycle(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.IPCTermBufferLength = 64 << 10
	cfg.ThreadingMode = Invoker
	cfg.TerminationValidator = "allow"
	d, err := Start(cfg)
	require.NoError(t, err)
	require.NoError(t, client.RequestDriverTermination(d.Dir(), nil))
	select {
	case <-d.Terminated():
		t.Fatal("terminated without being invoked")
	case <-time.After(20 * time.Millisecond):
	}
	for i := 0; i < 100; i++ {
		d.DoWork()
	}
	select {
	case <-d.Terminated():
	default:
		t.Fatal("TERMINATE_DRIVER read in DoWork did not stop the driver")
	}
	require.Zero(t, d.DoWork(), "a stopped driver does no work")
	active, _, err := IsDriverActive(d.Dir(), cfg.DriverTimeout)
	require.NoError(t, err)
	require.False(t, active, "the heartbeat is cleared on shutdown")
	require.NoError(t, d.Close())

	cfg.TerminationValidator = "deny"
	d, err = Start(cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-d.Terminated():
					return
				default:
					d.DoWork()
				}
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, d.Close())
	wg.Wait()
	require.Zero(t, d.DoWork())
}
