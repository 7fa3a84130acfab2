package driver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// ThreadingMode is AERON_THREADING_MODE (a plain value): which of the
// conductor, sender and receiver agents share a goroutine, and so which
// idle strategy each runs with. DEDICATED: three goroutines (conductor,
// sender, receiver idle strategies); SHARED_NETWORK: the conductor on one,
// sender and receiver on another (AERON_SHAREDNETWORK_IDLE_STRATEGY);
// SHARED: one goroutine (AERON_SHARED_IDLE_STRATEGY); INVOKER: no
// goroutine at all, the program that embeds the driver runs its duty cycle
// by calling Driver.DoWork (or gives the driver to its client, see
// client.Options.DriverInvoker).
type ThreadingMode string

// Threading modes of the C driver (aeronmd.h).
const (
	Dedicated     ThreadingMode = "DEDICATED"
	SharedNetwork ThreadingMode = "SHARED_NETWORK"
	Shared        ThreadingMode = "SHARED"
	Invoker       ThreadingMode = "INVOKER"
)

// Config is the driver configuration. Field defaults and environment
// variable names are the C driver's (aeron_driver_context.c). A Config is a
// value; the driver copies it at start.
type Config struct {
	Dir                 string        // AERON_DIR
	DirDeleteOnStart    bool          // AERON_DIR_DELETE_ON_START
	DirDeleteOnShutdown bool          // AERON_DIR_DELETE_ON_SHUTDOWN
	ThreadingMode       ThreadingMode // AERON_THREADING_MODE
	ConductorIdle       string        // AERON_CONDUCTOR_IDLE_STRATEGY: backoff, spin, yield, noop, sleep-ns
	SenderIdle          string        // AERON_SENDER_IDLE_STRATEGY (network media)
	ReceiverIdle        string        // AERON_RECEIVER_IDLE_STRATEGY (network media)
	SharedIdle          string        // AERON_SHARED_IDLE_STRATEGY
	SharedNetworkIdle   string        // AERON_SHAREDNETWORK_IDLE_STRATEGY
	// The strategies' parameters, as the C driver reads them
	// (AERON_*_IDLE_STRATEGY_INIT_ARGS): sleep-ns takes its period ("1000",
	// "10us"), backoff "spins-yields-minpark-maxpark" ("10-20-1us-1ms");
	// the others take none. Empty: the strategy's defaults.
	ConductorIdleArgs, SenderIdleArgs, ReceiverIdleArgs, SharedIdleArgs, SharedNetworkIdleArgs string
	// The CPU each agent's thread is pinned to, -1 for none
	// (AERON_CONDUCTOR_CPU_AFFINITY, AERON_SENDER_CPU_AFFINITY,
	// AERON_RECEIVER_CPU_AFFINITY; 0..255). As in the C driver, SHARED's
	// one thread takes the conductor's and SHARED_NETWORK's network thread
	// the sender's. A pinned agent runs on an OS thread of its own
	// (runtime.LockOSThread); a refused affinity is a warning in the error
	// log, and the agent runs unpinned.
	ConductorCPU, SenderCPU, ReceiverCPU int
	ToDriverBufferLength                 int // AERON_CONDUCTOR_BUFFER_LENGTH (capacity + 768-byte trailer)
	ToClientsBufferLen                   int // AERON_CLIENTS_BUFFER_LENGTH (capacity + 128-byte trailer)
	CounterValuesLength                  int // AERON_COUNTERS_BUFFER_LENGTH
	ErrorBufferLength                    int // AERON_ERROR_BUFFER_LENGTH
	LossReportLength                     int // AERON_LOSS_REPORT_BUFFER_LENGTH
	FilePageSize                         int // AERON_FILE_PAGE_SIZE

	TermBufferLength         int  // AERON_TERM_BUFFER_LENGTH (network publications)
	IPCTermBufferLength      int  // AERON_IPC_TERM_BUFFER_LENGTH
	TermBufferSparseFile     bool // AERON_TERM_BUFFER_SPARSE_FILE
	MTULength                int  // AERON_MTU_LENGTH
	IPCMTULength             int  // AERON_IPC_MTU_LENGTH
	IPCPublicationTermWindow int  // AERON_IPC_PUBLICATION_TERM_WINDOW_LENGTH (0: term length / 2)
	PublicationTermWindow    int  // AERON_PUBLICATION_TERM_WINDOW_LENGTH (0: term length / 2)
	InitialWindowLength      int  // AERON_RCV_INITIAL_WINDOW_LENGTH
	SocketSndbuf             int  // AERON_SOCKET_SO_SNDBUF
	SocketRcvbuf             int  // AERON_SOCKET_SO_RCVBUF

	ClientLivenessTimeout time.Duration // AERON_CLIENT_LIVENESS_TIMEOUT
	DriverTimeout         time.Duration // AERON_DRIVER_TIMEOUT in ms (active-driver detection)
	TimerInterval         time.Duration // AERON_TIMER_INTERVAL
	// ReResolutionCheckInterval is how often a send endpoint named by a
	// host name that heard no status message for 5 s resolves it again
	// (AERON_DRIVER_RERESOLUTION_CHECK_INTERVAL; 0 disables it)
	ReResolutionCheckInterval time.Duration
	PublicationLingerTimeout  time.Duration // AERON_PUBLICATION_LINGER_TIMEOUT
	PublicationUnblockTimeout time.Duration // AERON_PUBLICATION_UNBLOCK_TIMEOUT
	PublicationConnTimeout    time.Duration // AERON_PUBLICATION_CONNECTION_TIMEOUT
	ImageLivenessTimeout      time.Duration // AERON_IMAGE_LIVENESS_TIMEOUT
	StatusMessageTimeout      time.Duration // AERON_RCV_STATUS_MESSAGE_TIMEOUT
	CountersFreeToReuse       time.Duration // AERON_COUNTERS_FREE_TO_REUSE_TIMEOUT
	UntetheredWindowLimit     time.Duration // AERON_UNTETHERED_WINDOW_LIMIT_TIMEOUT
	UntetheredResting         time.Duration // AERON_UNTETHERED_RESTING_TIMEOUT
	SpiesSimulateConnection   bool          // AERON_SPIES_SIMULATE_CONNECTION
	TetherSubscriptions       bool          // AERON_TETHER_SUBSCRIPTIONS: default of a subscription's tether=
	TerminationValidator      string        // AERON_DRIVER_TERMINATION_VALIDATOR: "deny" (default) or "allow"

	PerformStorageChecks         bool  // AERON_PERFORM_STORAGE_CHECKS: refuse a log the file system has no room for
	LowFileStoreWarningThreshold int64 // AERON_LOW_FILE_STORE_WARNING_THRESHOLD: warn (error log) at or below this usable space

	Network NetworkConfig // flow control, receiver group tag, reliability (flowcontrol.go)
	Cubic   CubicConfig   // cc=cubic images (congestion.go)
}

// DefaultDir is the directory the C driver uses by default
// (aeron_default_path; cnc.DefaultDir, which the client and the tools
// share): /dev/shm/aeron-<user> on Linux, <tmp>/aeron-<user> elsewhere.
func DefaultDir() string { return cnc.DefaultDir() }

// DefaultConfig is the C driver's default configuration.
func DefaultConfig() Config {
	return Config{
		Dir:                       DefaultDir(),
		ThreadingMode:             Dedicated,
		ConductorIdle:             "backoff",
		SenderIdle:                "backoff",
		ReceiverIdle:              "backoff",
		SharedIdle:                "backoff",
		SharedNetworkIdle:         "backoff",
		ConductorCPU:              -1,
		SenderCPU:                 -1,
		ReceiverCPU:               -1,
		ToDriverBufferLength:      1<<20 + 768,
		ToClientsBufferLen:        1<<20 + 128,
		CounterValuesLength:       1 << 20,
		ErrorBufferLength:         1 << 20,
		LossReportLength:          1 << 20,
		FilePageSize:              4096,
		TermBufferLength:          16 << 20,
		IPCTermBufferLength:       64 << 20,
		TermBufferSparseFile:      false,
		MTULength:                 1408,
		IPCMTULength:              1408,
		InitialWindowLength:       128 << 10,
		ClientLivenessTimeout:     10 * time.Second,
		DriverTimeout:             10 * time.Second,
		TimerInterval:             time.Second,
		ReResolutionCheckInterval: time.Second,
		PublicationLingerTimeout:  5 * time.Second,
		PublicationUnblockTimeout: 15 * time.Second,
		PublicationConnTimeout:    5 * time.Second,
		ImageLivenessTimeout:      10 * time.Second,
		StatusMessageTimeout:      200 * time.Millisecond,
		CountersFreeToReuse:       time.Second,
		UntetheredWindowLimit:     5 * time.Second,
		UntetheredResting:         10 * time.Second,
		TerminationValidator:      "deny",
		PerformStorageChecks:      true,
		TetherSubscriptions:       true,
		// AERON_LOW_FILE_STORE_WARNING_THRESHOLD_DEFAULT: 160 MiB
		LowFileStoreWarningThreshold: 160 << 20,
		Network:                      defaultNetworkConfig(),
	}
}

// ConfigFromEnv starts from DefaultConfig and applies every AERON_*
// variable it knows from getenv (os.Getenv when nil). A malformed value is
// an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := DefaultConfig()
	var firstErr error
	note := func(name string, err error) {
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s=%q: %w", name, getenv(name), err)
		}
	}
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	size := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := ParseSize(v)
			note(name, err)
			if err == nil {
				*dst = int(n)
			}
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := ParseDuration(v)
			note(name, err)
			if err == nil {
				*dst = d
			}
		}
	}
	boolean := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			note(name, err)
			if err == nil {
				*dst = b
			}
		}
	}
	str("AERON_DIR", &c.Dir)
	boolean("AERON_DIR_DELETE_ON_START", &c.DirDeleteOnStart)
	boolean("AERON_DIR_DELETE_ON_SHUTDOWN", &c.DirDeleteOnShutdown)
	if v := getenv("AERON_THREADING_MODE"); v != "" {
		c.ThreadingMode = ThreadingMode(strings.ToUpper(v))
	}
	str("AERON_CONDUCTOR_IDLE_STRATEGY", &c.ConductorIdle)
	str("AERON_SENDER_IDLE_STRATEGY", &c.SenderIdle)
	str("AERON_RECEIVER_IDLE_STRATEGY", &c.ReceiverIdle)
	str("AERON_SHARED_IDLE_STRATEGY", &c.SharedIdle)
	str("AERON_SHAREDNETWORK_IDLE_STRATEGY", &c.SharedNetworkIdle)
	str("AERON_CONDUCTOR_IDLE_STRATEGY_INIT_ARGS", &c.ConductorIdleArgs)
	str("AERON_SENDER_IDLE_STRATEGY_INIT_ARGS", &c.SenderIdleArgs)
	str("AERON_RECEIVER_IDLE_STRATEGY_INIT_ARGS", &c.ReceiverIdleArgs)
	str("AERON_SHARED_IDLE_STRATEGY_INIT_ARGS", &c.SharedIdleArgs)
	str("AERON_SHAREDNETWORK_IDLE_STRATEGY_INIT_ARGS", &c.SharedNetworkIdleArgs)
	cpu := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil && (n < -1 || n > 255) {
				err = fmt.Errorf("%d is outside -1..255", n)
			}
			note(name, err)
			if err == nil {
				*dst = n
			}
		}
	}
	cpu("AERON_CONDUCTOR_CPU_AFFINITY", &c.ConductorCPU)
	cpu("AERON_SENDER_CPU_AFFINITY", &c.SenderCPU)
	cpu("AERON_RECEIVER_CPU_AFFINITY", &c.ReceiverCPU)
	size("AERON_CONDUCTOR_BUFFER_LENGTH", &c.ToDriverBufferLength)
	size("AERON_CLIENTS_BUFFER_LENGTH", &c.ToClientsBufferLen)
	size("AERON_COUNTERS_BUFFER_LENGTH", &c.CounterValuesLength)
	size("AERON_ERROR_BUFFER_LENGTH", &c.ErrorBufferLength)
	size("AERON_LOSS_REPORT_BUFFER_LENGTH", &c.LossReportLength)
	size("AERON_FILE_PAGE_SIZE", &c.FilePageSize)
	size("AERON_TERM_BUFFER_LENGTH", &c.TermBufferLength)
	size("AERON_IPC_TERM_BUFFER_LENGTH", &c.IPCTermBufferLength)
	boolean("AERON_TERM_BUFFER_SPARSE_FILE", &c.TermBufferSparseFile)
	size("AERON_MTU_LENGTH", &c.MTULength)
	size("AERON_IPC_MTU_LENGTH", &c.IPCMTULength)
	size("AERON_IPC_PUBLICATION_TERM_WINDOW_LENGTH", &c.IPCPublicationTermWindow)
	size("AERON_PUBLICATION_TERM_WINDOW_LENGTH", &c.PublicationTermWindow)
	size("AERON_RCV_INITIAL_WINDOW_LENGTH", &c.InitialWindowLength)
	size("AERON_SOCKET_SO_SNDBUF", &c.SocketSndbuf)
	size("AERON_SOCKET_SO_RCVBUF", &c.SocketRcvbuf)
	dur("AERON_CLIENT_LIVENESS_TIMEOUT", &c.ClientLivenessTimeout)
	if v := getenv("AERON_DRIVER_TIMEOUT"); v != "" {
		// The C driver reads this one as plain milliseconds.
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms <= 0 {
			note("AERON_DRIVER_TIMEOUT", fmt.Errorf("not a positive number of milliseconds"))
		} else {
			c.DriverTimeout = time.Duration(ms) * time.Millisecond
		}
	}
	dur("AERON_TIMER_INTERVAL", &c.TimerInterval)
	dur("AERON_DRIVER_RERESOLUTION_CHECK_INTERVAL", &c.ReResolutionCheckInterval)
	dur("AERON_PUBLICATION_LINGER_TIMEOUT", &c.PublicationLingerTimeout)
	dur("AERON_PUBLICATION_UNBLOCK_TIMEOUT", &c.PublicationUnblockTimeout)
	dur("AERON_PUBLICATION_CONNECTION_TIMEOUT", &c.PublicationConnTimeout)
	dur("AERON_IMAGE_LIVENESS_TIMEOUT", &c.ImageLivenessTimeout)
	dur("AERON_RCV_STATUS_MESSAGE_TIMEOUT", &c.StatusMessageTimeout)
	dur("AERON_COUNTERS_FREE_TO_REUSE_TIMEOUT", &c.CountersFreeToReuse)
	dur("AERON_UNTETHERED_WINDOW_LIMIT_TIMEOUT", &c.UntetheredWindowLimit)
	dur("AERON_UNTETHERED_RESTING_TIMEOUT", &c.UntetheredResting)
	boolean("AERON_SPIES_SIMULATE_CONNECTION", &c.SpiesSimulateConnection)
	boolean("AERON_TETHER_SUBSCRIPTIONS", &c.TetherSubscriptions)
	str("AERON_DRIVER_TERMINATION_VALIDATOR", &c.TerminationValidator)
	boolean("AERON_PERFORM_STORAGE_CHECKS", &c.PerformStorageChecks)
	if v := getenv("AERON_LOW_FILE_STORE_WARNING_THRESHOLD"); v != "" {
		n, err := ParseSize(v)
		note("AERON_LOW_FILE_STORE_WARNING_THRESHOLD", err)
		if err == nil {
			c.LowFileStoreWarningThreshold = n
		}
	}
	if err := c.Network.fromEnv(getenv); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := c.Cubic.fromEnv(getenv); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return c, firstErr
	}
	return c, c.Validate()
}

// Validate checks the configuration with the C driver's rules.
func (c *Config) Validate() error {
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	switch {
	case c.Dir == "":
		return fmt.Errorf("driver config: AERON_DIR is empty")
	case c.ThreadingMode != Dedicated && c.ThreadingMode != SharedNetwork && c.ThreadingMode != Shared && c.ThreadingMode != Invoker:
		return fmt.Errorf("driver config: AERON_THREADING_MODE %q: want DEDICATED, SHARED_NETWORK, SHARED or INVOKER", c.ThreadingMode)
	case !pow2(c.ToDriverBufferLength - 768):
		return fmt.Errorf("driver config: AERON_CONDUCTOR_BUFFER_LENGTH %d is not a power of two plus the 768-byte trailer", c.ToDriverBufferLength)
	case !pow2(c.ToClientsBufferLen - 128):
		return fmt.Errorf("driver config: AERON_CLIENTS_BUFFER_LENGTH %d is not a power of two plus the 128-byte trailer", c.ToClientsBufferLen)
	case c.CounterValuesLength <= 0 || c.CounterValuesLength%128 != 0:
		return fmt.Errorf("driver config: AERON_COUNTERS_BUFFER_LENGTH %d is not a positive multiple of 128", c.CounterValuesLength)
	case c.ErrorBufferLength <= 0 || c.ErrorBufferLength%8 != 0:
		return fmt.Errorf("driver config: AERON_ERROR_BUFFER_LENGTH %d is not a positive multiple of 8", c.ErrorBufferLength)
	case c.LossReportLength <= 0 || c.LossReportLength%64 != 0:
		return fmt.Errorf("driver config: AERON_LOSS_REPORT_BUFFER_LENGTH %d is not a positive multiple of 64", c.LossReportLength)
	case !pow2(c.FilePageSize) || c.FilePageSize < 4096:
		return fmt.Errorf("driver config: AERON_FILE_PAGE_SIZE %d is not a power of two >= 4096", c.FilePageSize)
	case !pow2(c.TermBufferLength) || c.TermBufferLength < 64<<10 || c.TermBufferLength > 1<<30:
		return fmt.Errorf("driver config: AERON_TERM_BUFFER_LENGTH %d is not a power of two in [64k, 1g]", c.TermBufferLength)
	case !pow2(c.IPCTermBufferLength) || c.IPCTermBufferLength < 64<<10 || c.IPCTermBufferLength > 1<<30:
		return fmt.Errorf("driver config: AERON_IPC_TERM_BUFFER_LENGTH %d is not a power of two in [64k, 1g]", c.IPCTermBufferLength)
	case c.MTULength < 64 || c.MTULength > 65504 || c.MTULength%32 != 0:
		return fmt.Errorf("driver config: AERON_MTU_LENGTH %d is not a multiple of 32 in [64, 65504]", c.MTULength)
	case c.IPCMTULength < 64 || c.IPCMTULength > 65504 || c.IPCMTULength%32 != 0:
		return fmt.Errorf("driver config: AERON_IPC_MTU_LENGTH %d is not a multiple of 32 in [64, 65504]", c.IPCMTULength)
	case c.IPCPublicationTermWindow < 0 || c.PublicationTermWindow < 0:
		return fmt.Errorf("driver config: term window lengths must not be negative")
	case c.ClientLivenessTimeout <= 0 || c.DriverTimeout <= 0 || c.TimerInterval <= 0:
		return fmt.Errorf("driver config: client liveness, driver timeout and timer interval must be positive")
	case c.TerminationValidator != "deny" && c.TerminationValidator != "allow":
		return fmt.Errorf("driver config: AERON_DRIVER_TERMINATION_VALIDATOR %q: ibgo knows \"deny\" and \"allow\"", c.TerminationValidator)
	}
	for name, s := range map[string][2]string{"AERON_CONDUCTOR_IDLE_STRATEGY": {c.ConductorIdle, c.ConductorIdleArgs},
		"AERON_SENDER_IDLE_STRATEGY": {c.SenderIdle, c.SenderIdleArgs}, "AERON_RECEIVER_IDLE_STRATEGY": {c.ReceiverIdle, c.ReceiverIdleArgs},
		"AERON_SHARED_IDLE_STRATEGY": {c.SharedIdle, c.SharedIdleArgs}, "AERON_SHAREDNETWORK_IDLE_STRATEGY": {c.SharedNetworkIdle, c.SharedNetworkIdleArgs}} {
		if _, err := NewIdleStrategyArgs(s[0], s[1]); err != nil {
			return fmt.Errorf("driver config: %s: %w", name, err)
		}
	}
	for name, n := range map[string]int{"AERON_CONDUCTOR_CPU_AFFINITY": c.ConductorCPU, "AERON_SENDER_CPU_AFFINITY": c.SenderCPU, "AERON_RECEIVER_CPU_AFFINITY": c.ReceiverCPU} {
		if n < -1 || n > 255 {
			return fmt.Errorf("driver config: %s %d is outside -1..255", name, n)
		}
	}
	return nil
}

// ParseSize parses a byte count with an optional k, m or g suffix, as
// aeron_parse_size64 does.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1<<10, t[:n-1]
		case 'm', 'M':
			mult, t = 1<<20, t[:n-1]
		case 'g', 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("not a size (a non-negative number with an optional k, m or g suffix)")
	}
	return v * mult, nil
}

// ParseDuration parses a duration as aeron_parse_duration_ns does: a number
// of nanoseconds with an optional ns, us, ms or s suffix.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	unit := time.Nanosecond
	for _, sfx := range []struct {
		s string
		d time.Duration
	}{{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}} {
		if strings.HasSuffix(t, sfx.s) {
			t, unit = strings.TrimSuffix(t, sfx.s), sfx.d
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > int64(1<<62)/int64(unit) {
		return 0, fmt.Errorf("not a duration (nanoseconds, or a number with an ns, us, ms or s suffix)")
	}
	return time.Duration(v) * unit, nil
}

// ipcTermWindow is the IPC publication window: AERON_IPC_PUBLICATION_TERM_WINDOW_LENGTH
// capped at half the term (aeron_producer_window_length).
func ipcTermWindow(configured, termLength int) int {
	w := termLength / 2
	if configured > 0 && configured < w {
		w = configured
	}
	return w
}
