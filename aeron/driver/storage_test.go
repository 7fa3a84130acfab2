package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

func withUsableSpace(fn func(string) (uint64, error)) Option {
	return func(o *options) { o.usableSpace = fn }
}

func startWith(t *testing.T, mod func(*Config), opts ...Option) (*Driver, *client.Client) {
	cfg := DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.IPCTermBufferLength = 64 << 10
	if mod != nil {
		mod(&cfg)
	}
	d, err := Start(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return d, cl
}

func errorLog(t *testing.T, dir string) []cnc.Observation {
	f, err := cnc.OpenFile(cnc.Path(dir), false)
	require.NoError(t, err)
	defer f.Close()
	var obs []cnc.Observation
	_, err = cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) { obs = append(obs, o) })
	require.NoError(t, err)
	return obs
}

// TestStorageSpaceRefusesNewLog: with less usable space than a log needs,
// a publication is refused with STORAGE_SPACE and the C driver's message;
// with enough but little space it is created and a warning is logged;
// with the checks off nothing is checked.
func TestStorageSpaceRefusesNewLog(t *testing.T) {
	ctx := context.Background()
	_, cl := startWith(t, nil, withUsableSpace(func(string) (uint64, error) { return 190, nil }))
	_, err := cl.AddPublication(ctx, "aeron:ipc", 1)
	var de *client.DriverError
	require.True(t, errors.As(err, &de), "want a driver error, got %v", err)
	require.Equal(t, client.StorageSpace, de.Code)
	want := fmt.Sprintf("insufficient usable storage for new log of length=%d usable=190 in ", logbuffer.ComputeLogLength(64<<10, 4096))
	require.Contains(t, de.Message, want)
	_, err = cl.AddExclusivePublication(ctx, "aeron:ipc", 1)
	require.ErrorIs(t, err, client.StorageSpace)

	d, cl := startWith(t, func(c *Config) { c.LowFileStoreWarningThreshold = 1 << 30 },
		withUsableSpace(func(string) (uint64, error) { return 100 << 20, nil }))
	_, err = cl.AddPublication(ctx, "aeron:ipc", 1)
	require.NoError(t, err)
	found := false
	for _, o := range errorLog(t, d.Dir()) {
		if strings.Contains(o.Text, fmt.Sprintf("WARNING: space is running low: threshold=%d usable=%d in %s", 1<<30, 100<<20, d.Dir())) {
			found = true
		}
	}
	require.True(t, found, "the low-space warning is in the error log")

	_, cl = startWith(t, func(c *Config) { c.PerformStorageChecks = false }, withUsableSpace(func(string) (uint64, error) { return 0, nil }))
	_, err = cl.AddPublication(ctx, "aeron:ipc", 1)
	require.NoError(t, err, "AERON_PERFORM_STORAGE_CHECKS=false skips the check")
}

// TestUsableSpaceMeasured: the real measurement says something
// plausible for the test's directory.
func TestUsableSpaceMeasured(t *testing.T) {
	d, _ := startWith(t, nil)
	n, err := d.c.usableSpace(d.Dir())
	if err != nil {
		t.Skipf("usable space not measured here: %v", err)
	}
	require.Greater(t, n, uint64(0))
}

// TestTerminationToken: a validator on the token terminates the driver
// for the right token only.
func TestTerminationToken(t *testing.T) {
	d := func() *Driver {
		cfg := DefaultConfig()
		cfg.Dir = filepath.Join(t.TempDir(), "aeron")
		d, err := Start(cfg, WithTerminationToken([]byte("s3cret")))
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}()
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), true)
	require.NoError(t, err)
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)
	send := func(token string) {
		require.NoError(t, client.RequestDriverTermination(d.Dir(), []byte(token)))
		require.Eventually(t, func() bool { return rb.ConsumerPosition() == rb.ProducerPosition() }, 30*time.Second, time.Millisecond)
	}
	for _, wrong := range []string{"", "s3cre", "s3cret!", "S3CRET"} {
		send(wrong)
		select {
		case <-d.Terminated():
			t.Fatalf("token %q terminated the driver", wrong)
		case <-time.After(20 * time.Millisecond):
		}
	}
	send("s3cret")
	select {
	case <-d.Terminated():
	case <-time.After(30 * time.Second):
		t.Fatal("the right token did not terminate the driver")
	}
}
