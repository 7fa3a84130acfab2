package driver

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/internal/shm"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"AERON_DIR":                        "/tmp/x",
		"AERON_IPC_TERM_BUFFER_LENGTH":     "1m",
		"AERON_MTU_LENGTH":                 "8192",
		"AERON_CLIENT_LIVENESS_TIMEOUT":    "2500ms",
		"AERON_PUBLICATION_LINGER_TIMEOUT": "1000000",
		"AERON_THREADING_MODE":             "shared",
		"AERON_CONDUCTOR_IDLE_STRATEGY":    "sleep-ns,1000",
		"AERON_DIR_DELETE_ON_START":        "true",
		"AERON_DRIVER_TIMEOUT":             "2000",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "/tmp/x", c.Dir)
	require.Equal(t, 1<<20, c.IPCTermBufferLength)
	require.Equal(t, 8192, c.MTULength)
	require.Equal(t, 2500*time.Millisecond, c.ClientLivenessTimeout)
	require.Equal(t, time.Millisecond, c.PublicationLingerTimeout, "a bare number is nanoseconds")
	require.Equal(t, Shared, c.ThreadingMode)
	require.True(t, c.DirDeleteOnStart)
	require.Equal(t, 2*time.Second, c.DriverTimeout, "milliseconds, as the C driver reads it")
	env["AERON_THREADING_MODE"] = "shared_network"
	env["AERON_SHAREDNETWORK_IDLE_STRATEGY"] = "yield"
	c, err = ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, SharedNetwork, c.ThreadingMode)
	require.Equal(t, "yield", c.SharedNetworkIdle)
	env["AERON_THREADING_MODE"] = "invoker"
	c, err = ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, Invoker, c.ThreadingMode)
	env["AERON_THREADING_MODE"] = "turbo"
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "AERON_THREADING_MODE")
	env["AERON_THREADING_MODE"] = "dedicated"
	env["AERON_SENDER_IDLE_STRATEGY"] = "sleep-ns,abc"
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "AERON_SENDER_IDLE_STRATEGY")
	delete(env, "AERON_SENDER_IDLE_STRATEGY")
	// Untouched values keep the C driver's defaults.
	d := DefaultConfig()
	require.Equal(t, 16<<20, d.TermBufferLength)
	require.Equal(t, 64<<20, d.IPCTermBufferLength)
	require.Equal(t, 1408, d.MTULength)
	require.Equal(t, 10*time.Second, d.ClientLivenessTimeout)
	require.Equal(t, 5*time.Second, d.PublicationLingerTimeout)
	require.Equal(t, 15*time.Second, d.PublicationUnblockTimeout)
	require.Equal(t, c.TermBufferLength, d.TermBufferLength)

	for k, v := range map[string]string{
		"AERON_IPC_TERM_BUFFER_LENGTH":  "100k",
		"AERON_CLIENT_LIVENESS_TIMEOUT": "soon",
		"AERON_THREADING_MODE":          "turbo",
		"AERON_CONDUCTOR_IDLE_STRATEGY": "custom_symbol",
		"AERON_MTU_LENGTH":              "1000",
	} {
		_, err := ConfigFromEnv(func(n string) string {
			if n == k {
				return v
			}
			return ""
		})
		require.Error(t, err, "%s=%s", k, v)
		require.Contains(t, err.Error(), strings.TrimPrefix(k, ""), "the error names the variable")
	}
}

func TestParseSizeAndDuration(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "64k": 64 << 10, "16M": 16 << 20, "1g": 1 << 30} {
		got, err := ParseSize(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	for in, want := range map[string]time.Duration{"10": 10, "5us": 5 * time.Microsecond, "200ms": 200 * time.Millisecond, "10s": 10 * time.Second} {
		got, err := ParseDuration(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "-1", "1x", "k"} {
		_, err := ParseSize(bad)
		require.Error(t, err, bad)
		_, err = ParseDuration(bad)
		require.Error(t, err, bad)
	}
}

func start(t *testing.T, mod func(*Config)) *Driver {
	cfg := DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.IPCTermBufferLength = 64 << 10
	if mod != nil {
		mod(&cfg)
	}
	d, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// The CnC file of a default driver has the C driver 1.48's layout: same
// header lengths and offsets as the recorded cnc.dat, and the same system
// counter rows.
func TestCnCLayoutMatchesCDriver(t *testing.T) {
	d := start(t, nil)
	ours, err := cnc.Open(d.Dir())
	require.NoError(t, err)
	defer ours.Close()
	ref, err := cnc.Wrap(testvec.Copy("cnc.dat", shm.Alloc))
	require.NoError(t, err)

	require.Equal(t, len(ref.Bytes()), len(ours.Bytes()), "file length")
	for _, off := range []int{cnc.VersionOffset, cnc.ToDriverBufferLengthOffset, cnc.ToClientsBufferLengthOffset,
		cnc.CounterMetadataBufferLengthOffset, cnc.CounterValuesBufferLengthOffset, cnc.ErrorLogBufferLengthOffset} {
		require.Equal(t, ref.Bytes()[off:off+4], ours.Bytes()[off:off+4], "header offset %d", off)
	}
	require.Equal(t, ref.ClientLivenessTimeout(), ours.ClientLivenessTimeout())
	require.Equal(t, int64(os.Getpid()), ours.PID())
	require.InDelta(t, time.Now().UnixMilli(), ours.StartTimestamp(), 60_000)
	require.InDelta(t, time.Now().UnixMilli(), ours.DriverHeartbeat(), 60_000)

	rr, err := ref.Counters()
	require.NoError(t, err)
	or, err := ours.Counters()
	require.NoError(t, err)
	for id := int32(0); id < 40; id++ {
		require.Equal(t, rr.CounterTypeID(id), or.CounterTypeID(id), "counter %d type", id)
		require.Equal(t, rr.CounterKey(id), or.CounterKey(id), "counter %d key", id)
		want, got := rr.CounterLabel(id), or.CounterLabel(id)
		if strings.Contains(want, "version=") {
			want, _, _ = strings.Cut(want, "version=")
			got, _, _ = strings.Cut(got, "version=")
		}
		require.Equal(t, want, strings.ReplaceAll(got, string(Dedicated), "SHARED"), "counter %d label", id)
	}
	require.Equal(t, int64(77824), or.CounterValue(sysAeronVersion), "1.48.0 as the C driver reports it")
	require.Equal(t, "Control protocol version", or.CounterLabel(sysControlProtocolVersion))

	for _, name := range []string{"publications", "images", cnc.LossReportFileName} {
		_, err := os.Stat(filepath.Join(d.Dir(), name))
		require.NoError(t, err, name)
	}
}

func TestActiveDriverRefusedStaleReplaced(t *testing.T) {
	d := start(t, nil)
	cfg := d.Config()
	_, err := Start(cfg)
	require.ErrorIs(t, err, ErrActiveDriver)
	require.Contains(t, err.Error(), "--dir-delete-on-start")

	// A stale directory (heartbeat older than the driver timeout) is replaced.
	require.NoError(t, d.Close())
	marker := filepath.Join(cfg.Dir, "publications", "stale.logbuffer")
	require.NoError(t, os.WriteFile(marker, []byte("x"), 0o600))
	f, err := cnc.OpenFile(cnc.Path(cfg.Dir), true)
	require.NoError(t, err)
	rb, err := f.ToDriver()
	require.NoError(t, err)
	rb.SetConsumerHeartbeatTime(time.Now().Add(-time.Hour).UnixMilli())
	f.Close()
	d2, err := Start(cfg)
	require.NoError(t, err)
	_, err = os.Stat(marker)
	require.ErrorIs(t, err, os.ErrNotExist, "the stale directory was recreated")

	// --dir-delete-on-start replaces even a live one.
	cfg.DirDeleteOnStart = true
	d3, err := Start(cfg)
	require.NoError(t, err)
	d2.Close()
	d3.Close()
}

func writeCommand(t *testing.T, dir string, typeID int32, msg []byte) {
	f, err := cnc.OpenFile(cnc.Path(dir), true)
	require.NoError(t, err)
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)
	require.NoError(t, rb.Write(typeID, msg))
}

func TestTerminateDriverValidator(t *testing.T) {
	cmd := cnc.AppendTerminateCommand(nil, cnc.TerminateCommand{Correlated: cnc.Correlated{ClientID: 1, CorrelationID: 2}, Token: []byte("t")})
	denied := start(t, nil)
	writeCommand(t, denied.Dir(), cnc.CmdTerminateDriver, cmd)
	allowed := start(t, func(c *Config) { c.TerminationValidator = "allow" })
	writeCommand(t, allowed.Dir(), cnc.CmdTerminateDriver, cmd)
	select {
	case <-allowed.Terminated():
	case <-time.After(30 * time.Second):
		t.Fatal("driver with validator allow did not terminate")
	}
	select {
	case <-denied.Terminated():
		t.Fatal("driver with validator deny terminated")
	default:
	}
}

// The log of an IPC publication is laid out as the C driver's: metadata
// values the clients read, default header, tails.
func TestIPCPublicationLog(t *testing.T) {
	d := start(t, nil)
	var reg int64 = 77
	writeCommand(t, d.Dir(), cnc.CmdAddPublication, cnc.AppendPublicationCommand(nil, cnc.PublicationCommand{Correlated: cnc.Correlated{ClientID: 5, CorrelationID: reg}, StreamID: 1001, Channel: "aeron:ipc?term-length=128k|mtu=4096"}))
	path := filepath.Join(d.Dir(), "publications", "77.logbuffer")
	f, err := cnc.Open(d.Dir())
	require.NoError(t, err)
	defer f.Close()
	counters, err := f.Counters()
	require.NoError(t, err)
	// The pub-lmt counter is allocated once the log is complete (clients
	// only map it after ON_PUBLICATION_READY).
	deadline := time.Now().Add(30 * time.Second)
	for counters.FindByTypeIDAndRegistrationID(cnc.TypePublisherLimit, reg) == cnc.NullCounterID {
		require.True(t, time.Now().Before(deadline), "publication never became ready")
		time.Sleep(time.Millisecond)
	}
	lb, err := logbuffer.Open(path, false)
	require.NoError(t, err)
	defer lb.Close()
	m := lb.Metadata()
	require.Equal(t, int64(3*128<<10+4096), int64(len(lb.Bytes())))
	require.Equal(t, reg, m.CorrelationID())
	require.Equal(t, int32(128<<10), m.TermLength())
	require.Equal(t, int32(4096), m.MTULength())
	require.Equal(t, int32(4096), m.PageSize())
	require.Equal(t, int32(64<<10), m.PublicationWindowLength())
	require.Equal(t, int32(32), m.DefaultFrameHeaderLength())
	require.Equal(t, int64(5*time.Second), m.LingerTimeoutNs())
	require.True(t, m.SignalEOS())
	require.False(t, m.IsConnected())
	init := m.InitialTermID()
	require.Equal(t, logbuffer.PackTail(init, 0), m.RawTailVolatile(0))
	require.Equal(t, logbuffer.PackTail(init-2, 0), m.RawTailVolatile(1))
	require.Equal(t, logbuffer.PackTail(init-1, 0), m.RawTailVolatile(2))
	hdr := m.DefaultFrameHeader()
	require.Equal(t, uint32(1001), binary.LittleEndian.Uint32(hdr[16:]))
	require.Equal(t, uint32(init), binary.LittleEndian.Uint32(hdr[20:]))
}
