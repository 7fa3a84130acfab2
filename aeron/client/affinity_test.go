//go:build linux

package client_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/internal/sys"
)

// TestConductorCPUAffinity (issue 34): PinConductor puts the client
// conductor on a thread restricted to ConductorCPU; a CPU the machine
// lacks is reported through OnError and the client works unpinned.
func TestConductorCPUAffinity(t *testing.T) {
	d := startDriver(t, testConfig(t))
	last := runtime.NumCPU() - 1
	got := make(chan []int, 1)
	client.OnConductorPinned(func(cpu int) {
		cpus, err := sys.ThreadCPUs()
		require.NoError(t, err)
		got <- cpus
	})
	defer client.OnConductorPinned(nil)
	connect(t, d.Dir(), func(o *client.Options) { o.PinConductor, o.ConductorCPU = true, last })
	select {
	case cpus := <-got:
		require.Equal(t, []int{last}, cpus)
	case <-time.After(5 * time.Second):
		t.Fatal("the conductor was not pinned")
	}

	errs := make(chan error, 4)
	c := connect(t, d.Dir(), func(o *client.Options) {
		o.PinConductor, o.ConductorCPU = true, 1023
		o.OnError = func(err error) { errs <- err }
	})
	select {
	case err := <-errs:
		require.ErrorContains(t, err, "client conductor: unable to apply affinity")
	case <-time.After(5 * time.Second):
		t.Fatal("no error for an impossible CPU")
	}
	_, err := c.AddSubscription(t.Context(), "aeron:ipc", 9)
	require.NoError(t, err, "the unpinned client works")
}
