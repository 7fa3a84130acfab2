package ib

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// TestDeviceOutOfBuffer: the ports' out_of_buffer counters are read once
// a second as the increase since the first read, summed over the ports
// in use; a device without the counter leaves the value alone, and a
// counter reset starts a new base.
func TestDeviceOutOfBuffer(t *testing.T) {
	root := t.TempDir()
	old := uverbs.SysfsRoot
	uverbs.SysfsRoot = root
	defer func() { uverbs.SysfsRoot = old }()
	set := func(dev, v string) {
		d := filepath.Join(root, "class/infiniband", dev, "ports/1/hw_counters")
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "out_of_buffer"), []byte(v+"\n"), 0o644))
	}
	m := New()
	m.usePort("rxe0", 1) // no hw counter: nothing read
	now := time.Now().UnixNano()
	m.readDeviceCounters(now)
	require.Zero(t, m.DeviceOutOfBuffer.Load())

	set("mlx5_0", "1000")
	set("mlx5_1", "7")
	m.usePort("mlx5_0", 1)
	m.usePort("mlx5_1", 1)
	now += deviceCounterEvery.Nanoseconds()
	m.readDeviceCounters(now)
	require.Zero(t, m.DeviceOutOfBuffer.Load(), "the first read is the base")
	set("mlx5_0", "1040")
	set("mlx5_1", "9")
	m.readDeviceCounters(now + 1) // within the second: not read
	require.Zero(t, m.DeviceOutOfBuffer.Load())
	now += deviceCounterEvery.Nanoseconds()
	m.readDeviceCounters(now)
	require.EqualValues(t, 42, m.DeviceOutOfBuffer.Load())
	set("mlx5_1", "3") // reset (driver reload): a new base
	now += deviceCounterEvery.Nanoseconds()
	m.readDeviceCounters(now)
	require.EqualValues(t, 40, m.DeviceOutOfBuffer.Load())
}
