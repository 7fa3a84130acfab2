package driver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/shm"
)

// Version is the Aeron release whose driver behaviour and file layouts ibgo
// follows; it is what the "Aeron software" system counter reports.
var Version = cnc.ComposeSemanticVersion(1, 48, 0)

// ControlProtocolVersion is published in system counter 43 so that Aeron
// 1.53 clients use the newer commands (GET_NEXT_AVAILABLE_SESSION_ID).
var ControlProtocolVersion = cnc.ComposeSemanticVersion(1, 0, 0)

// ErrActiveDriver is returned by Start when another driver is alive in the
// directory (its heartbeat is younger than the driver timeout).
var ErrActiveDriver = errors.New("active driver detected")

// Driver is a running media driver. Start it with Start; Close stops it.
// Its methods are safe for concurrent use; the driver state is owned by its
// agents (conductor, sender, receiver), which run on the goroutines the
// threading mode gives them, or, in INVOKER mode, inside DoWork, whose
// calls (from any goroutines) are serialised.
type Driver struct {
	cfg  Config
	cnc  *cnc.File
	loss *shm.Mapping
	c    *conductor

	// INVOKER: invokeMu serialises DoWork and the shutdown; stopped says
	// the agents have shut down
	invokeMu sync.Mutex
	stopped  bool

	stopOnce sync.Once
	sink     errorSink
	stop     chan struct{}
	done     chan struct{}
	closed   atomic.Bool
	err      error
}

// Option changes how a driver starts.
type Option func(*options)

type options struct {
	media       mediaRegistry
	log         io.Writer
	observer    func(typeID int32, msg []byte)
	validator   func(token []byte) bool
	usableSpace func(dir string) (uint64, error)
}

// WithTerminationValidator decides TERMINATE_DRIVER commands by their
// token, in place of the AERON_DRIVER_TERMINATION_VALIDATOR named one (the
// C driver's aeron_driver_termination_validator_func_t). fn runs on the
// conductor goroutine; token is only valid during the call.
func WithTerminationValidator(fn func(token []byte) bool) Option {
	return func(o *options) { o.validator = fn }
}

// WithTerminationToken is a validator that terminates the driver only for
// a command carrying exactly token (compared in constant time).
func WithTerminationToken(token []byte) Option {
	t := append([]byte(nil), token...)
	return WithTerminationValidator(func(got []byte) bool { return subtle.ConstantTimeCompare(got, t) == 1 })
}

// WithCommandObserver calls fn with every command read from the to-driver
// ring buffer, before it is handled, on the conductor goroutine; msg is
// only valid during the call. For recording what real clients send.
func WithCommandObserver(fn func(typeID int32, msg []byte)) Option {
	return func(o *options) { o.observer = fn }
}

// WithMedia adds a network medium (udp, ib) to the driver.
func WithMedia(m Media) Option {
	return func(o *options) { o.media[uri.Media(m.Name())] = m }
}

// WithLog sets where the driver writes what it does (nil: nowhere).
func WithLog(w io.Writer) Option { return func(o *options) { o.log = w } }

// Start prepares the Aeron directory (refusing one in use by a live driver
// unless DirDeleteOnStart), creates cnc.dat and loss-report.dat as the C
// driver lays them out and starts the agents (in INVOKER mode the caller
// runs them through DoWork).
func Start(cfg Config, opts ...Option) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{media: mediaRegistry{}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := prepareDir(cfg); err != nil {
		return nil, err
	}
	for _, sub := range []string{"publications", "images"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, sub), 0o777); err != nil {
			return nil, fmt.Errorf("driver: %w", err)
		}
	}
	loss, err := shm.CreateAllocated(cnc.LossReportPath(cfg.Dir), int64(cfg.LossReportLength))
	if err != nil {
		return nil, fmt.Errorf("driver: loss report: %w", err)
	}
	layout := cnc.Layout{
		ToDriverCapacity:      cfg.ToDriverBufferLength - cnc.RingBufferTrailerLength,
		ToClientsCapacity:     cfg.ToClientsBufferLen - cnc.BroadcastTrailerLength,
		CounterValuesLength:   cfg.CounterValuesLength,
		ErrorLogLength:        cfg.ErrorBufferLength,
		ClientLivenessTimeout: cfg.ClientLivenessTimeout,
		StartTimestamp:        time.Now(),
		PID:                   int64(os.Getpid()),
		FilePageSize:          cfg.FilePageSize,
	}
	// cnc.Create publishes the version last; commands that clients write
	// before the conductor below runs simply queue in the ring buffer.
	f, err := cnc.Create(cnc.Path(cfg.Dir), layout)
	if err != nil {
		loss.Close()
		return nil, fmt.Errorf("driver: %w", err)
	}
	c, err := newConductor(cfg, f, loss.Bytes(), o.media, o.log)
	if err != nil {
		f.Close()
		loss.Close()
		return nil, err
	}
	d := &Driver{cfg: cfg, cnc: f, loss: loss, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	d.sink.c = c
	for _, m := range o.media {
		if r, ok := m.(ErrorReporter); ok {
			r.SetErrorHandler(d.sink.report)
		}
	}
	c.terminate = d.requestStop
	if o.validator != nil {
		c.validator = o.validator
	}
	if o.usableSpace != nil {
		c.usableSpace = o.usableSpace
	}
	if o.observer != nil {
		handle := c.handler
		c.handler = func(typeID int32, msg []byte) {
			o.observer(typeID, msg)
			handle(typeID, msg)
		}
	}
	if cfg.ThreadingMode != Invoker {
		go d.run()
	}
	return d, nil
}

// prepareDir mirrors aeron_driver_ensure_dir_is_recreated: delete on
// start when asked, refuse a live driver, replace a stale directory.
func prepareDir(cfg Config) error {
	if cfg.DirDeleteOnStart {
		if err := os.RemoveAll(cfg.Dir); err != nil {
			return fmt.Errorf("driver: delete %s on start: %w", cfg.Dir, err)
		}
	} else if _, err := os.Stat(cfg.Dir); err == nil {
		if active, age, err := IsDriverActive(cfg.Dir, cfg.DriverTimeout); err == nil && active {
			return fmt.Errorf("driver: %w in %s (heartbeat %v ago, younger than the %v driver timeout); stop it or use --dir-delete-on-start (AERON_DIR_DELETE_ON_START)",
				ErrActiveDriver, cfg.Dir, age.Round(time.Millisecond), cfg.DriverTimeout)
		}
		if err := os.RemoveAll(cfg.Dir); err != nil {
			return fmt.Errorf("driver: replace stale %s: %w", cfg.Dir, err)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o777); err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	return nil
}

// IsDriverActive reports whether a driver in dir has marked itself alive
// within timeout (aeron_is_driver_active_with_cnc), and how long ago.
func IsDriverActive(dir string, timeout time.Duration) (bool, time.Duration, error) {
	f, err := cnc.OpenFile(cnc.Path(dir), false)
	if err != nil {
		return false, 0, err
	}
	defer f.Close()
	hb := f.DriverHeartbeat()
	age := time.Since(time.UnixMilli(hb))
	return age >= -time.Second && age < timeout, age, nil
}

// run starts the agents as the threading mode says (aeron_driver_start):
// DEDICATED runs the conductor, sender and receiver on three goroutines,
// SHARED_NETWORK the conductor on one and sender and receiver on another,
// SHARED all three on one. Each goroutine has its idle strategy. When they
// have all stopped, the conductor releases everything.
func (d *Driver) run() {
	defer close(d.done)
	c := d.c
	idle := func(name, args string) IdleStrategy {
		s, _ := NewIdleStrategyArgs(name, args) // Validate checked every name
		return s
	}
	var wg sync.WaitGroup
	// start runs agents on a goroutine of their own; with a cpu (>= 0) on
	// an OS thread of its own pinned to it (aeron_set_thread_affinity_on_start;
	// role is the C driver's agent name)
	start := func(role string, cpu int, s IdleStrategy, agents ...agent) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cpu >= 0 {
				if err := pinAgent(cpu); err != nil {
					d.sink.report(fmt.Errorf("WARNING: unable to apply affinity: role_name=%s: %w", role, err))
				}
			}
			runAgents(d.stop, s, agents...)
		}()
	}
	cfg := &d.cfg
	switch cfg.ThreadingMode {
	case Shared:
		// aeron_driver_shared_do_work: sender, receiver, conductor
		start("[conductor, sender, receiver]", cfg.ConductorCPU, idle(cfg.SharedIdle, cfg.SharedIdleArgs), c.snd, c.recv, c)
	case SharedNetwork:
		start("conductor", cfg.ConductorCPU, idle(cfg.ConductorIdle, cfg.ConductorIdleArgs), c)
		start("[sender, receiver]", cfg.SenderCPU, idle(cfg.SharedNetworkIdle, cfg.SharedNetworkIdleArgs), c.snd, c.recv)
	default:
		start("conductor", cfg.ConductorCPU, idle(cfg.ConductorIdle, cfg.ConductorIdleArgs), c)
		start("sender", cfg.SenderCPU, idle(cfg.SenderIdle, cfg.SenderIdleArgs), c.snd)
		start("receiver", cfg.ReceiverCPU, idle(cfg.ReceiverIdle, cfg.ReceiverIdleArgs), c.recv)
	}
	wg.Wait()
	c.shutdown()
}

// errorSink is the handler given to ErrorReporter media: it records into
// the conductor's error log until Close unmaps it.
type errorSink struct {
	mu sync.RWMutex
	c  *conductor
}

func (s *errorSink) report(err error) {
	if err == nil {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.c != nil {
		s.c.recordError(cnc.ErrorCodeGenericError, err.Error())
	}
}

func (d *Driver) requestStop() { d.stopOnce.Do(func() { close(d.stop) }) }

// DoWork runs one duty cycle of the sender, receiver and conductor agents
// on the caller's goroutine and returns the work done, for a driver in
// INVOKER threading mode (aeron_driver_main_do_work, whose composite agent
// is the SHARED one). Nothing in the driver moves between calls: clients'
// commands wait, publication limits stay, datagrams are neither sent nor
// read, and the driver heartbeat ages, so call it often (every few
// microseconds to a millisecond, idling when it returns 0), at the latest
// well within the driver timeout. Calls are serialised; after the driver
// stopped (Close, or TERMINATE_DRIVER during a call) DoWork returns 0, as
// it does in every other threading mode, where the driver runs itself.
func (d *Driver) DoWork() int {
	if d.cfg.ThreadingMode != Invoker {
		return 0
	}
	d.invokeMu.Lock()
	defer d.invokeMu.Unlock()
	if d.stopped {
		return 0
	}
	select {
	case <-d.stop:
		d.shutdownInvokerLocked()
		return 0
	default:
	}
	c := d.c
	// aeron_driver_shared_do_work's order
	work := c.snd.doWork() + c.recv.doWork() + c.doWork()
	select {
	case <-d.stop: // a TERMINATE_DRIVER command in this cycle
		d.shutdownInvokerLocked()
	default:
	}
	return work
}

// shutdownInvokerLocked releases everything, as run does once the agent
// goroutines have stopped, on the invoking goroutine.
func (d *Driver) shutdownInvokerLocked() {
	if d.stopped {
		return
	}
	d.stopped = true
	d.c.shutdown()
	close(d.done)
}

// Terminated is closed when the driver stopped, by Close or by a valid
// TERMINATE_DRIVER command.
func (d *Driver) Terminated() <-chan struct{} { return d.done }

// Config is the configuration the driver runs with.
func (d *Driver) Config() Config { return d.cfg }

// Dir is the Aeron directory.
func (d *Driver) Dir() string { return d.cfg.Dir }

// Media names the media the driver serves: "ipc", its own, then each
// network medium it was started with (WithMedia), sorted.
func (d *Driver) Media() []string {
	names := make([]string, 0, len(d.c.media))
	for n := range d.c.media {
		names = append(names, string(n))
	}
	sort.Strings(names)
	return append([]string{"ipc"}, names...)
}

// Close stops the conductor, unmaps the files and, with
// DirDeleteOnShutdown, removes the directory. It is idempotent.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		<-d.done
		return d.err
	}
	d.requestStop()
	if d.cfg.ThreadingMode == Invoker {
		d.invokeMu.Lock()
		d.shutdownInvokerLocked()
		d.invokeMu.Unlock()
	}
	<-d.done
	d.sink.mu.Lock()
	d.sink.c = nil // the error log is unmapped next: media reports stop here
	d.sink.mu.Unlock()
	d.err = errors.Join(d.cnc.Close(), d.loss.Close())
	if d.cfg.DirDeleteOnShutdown {
		d.err = errors.Join(d.err, os.RemoveAll(d.cfg.Dir))
	}
	return d.err
}
