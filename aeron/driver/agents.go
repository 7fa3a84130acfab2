package driver

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/internal/sys"
)

// The driver's three agents and how they are scheduled, as the C driver
// has them (aeron_driver.c, aeron_driver_sender.c, aeron_driver_receiver.c):
// the conductor owns every resource and talks to clients; the sender runs
// the network publications' send duty; the receiver reads datagrams into
// images and sends their status messages and NAKs. Agents hand work to each
// other through command queues (the C "proxies"); in SHARED mode, where one
// goroutine runs all three, a proxy calls the other agent directly, as
// aeron_driver_sender_proxy.c does when the threading mode is shared.

// commandQueueCapacity bounds each agent's command queue (the C driver's
// AERON_COMMAND_QUEUE_CAPACITY is 1024 too).
const commandQueueCapacity = 1024

// commandsPerDuty is how many queued commands an agent runs per duty cycle
// (aeron_driver_sender.c drains up to AERON_COMMAND_DRAIN_LIMIT, 10).
const commandsPerDuty = 10

// proxy hands commands to one agent. Commands are control-plane events
// (a publication added, an image created), not per-message work.
// offer is safe for concurrent use; drain only by the owning agent.
type proxy struct {
	direct bool
	q      chan func()
	failed *atomic.Int64 // "Failed offers to ...Proxy"
}

func newProxy(direct bool, failed *atomic.Int64) *proxy {
	return &proxy{direct: direct, q: make(chan func(), commandQueueCapacity), failed: failed}
}

// offer runs fn on the agent: now when the caller is that agent's own
// goroutine (shared mode), else at its next duty cycle. A full queue is
// counted and retried, as the C proxies do.
func (p *proxy) offer(fn func()) {
	if p.direct {
		fn()
		return
	}
	for {
		select {
		case p.q <- fn:
			return
		default:
			p.failed.Add(1)
			runtime.Gosched()
		}
	}
}

// tryOffer is offer without the wait: a full queue is counted and the
// command not queued (false). An agent that must never wait on another
// (the receiver on the conductor, which may itself wait on the receiver's
// queue) uses it and asks again later.
func (p *proxy) tryOffer(fn func()) bool {
	if p.direct {
		fn()
		return true
	}
	select {
	case p.q <- fn:
		return true
	default:
		p.failed.Add(1)
		return false
	}
}

// drain runs up to commandsPerDuty queued commands.
func (p *proxy) drain() int {
	n := 0
	for n < commandsPerDuty {
		select {
		case fn := <-p.q:
			fn()
			n++
		default:
			return n
		}
	}
	return n
}

// agent is one duty cycle of the conductor, sender or receiver.
type agent interface {
	doWork() int
}

// cycleTracker keeps an agent's max cycle time and threshold-exceeded
// system counters (aeron_duty_cycle_stall_tracker).
type cycleTracker struct {
	max              int64
	maxCtr, exceeded *atomic.Int64
}

func (t *cycleTracker) record(startNs int64) {
	if d := time.Now().UnixNano() - startNs; d > t.max {
		t.max = d
		t.maxCtr.Store(d)
		if d > conductorCycleThresholdNs {
			t.exceeded.Add(1)
		}
	}
}

// runAgents runs agents on one goroutine with one idle strategy until stop
// is closed (aeron_agent_runner; several agents make the C driver's
// composite agent of the shared modes).
func runAgents(stop <-chan struct{}, idle IdleStrategy, agents ...agent) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		work := 0
		for _, a := range agents {
			work += a.doWork()
		}
		idle.Idle(work)
	}
}

// syncWriter serialises the driver log, which every agent writes to.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// releasable is a resource an agent used that the conductor frees only
// once that agent says it let go (the C driver's has_sender_released /
// has_receiver_released flags).
type releasable struct {
	released *atomic.Bool
	free     func()
}

// pinAgent puts the calling agent goroutine on an OS thread of its own
// pinned to cpu; a test hook observes it (agentPinned).
func pinAgent(cpu int) error {
	err := sys.PinThread(cpu)
	if f := agentPinned.Load(); f != nil {
		(*f)(cpu)
	}
	return err
}

// agentPinned, when set, runs on each pinned agent's thread right after
// pinning (affinity_test.go reads the thread's CPUs there).
var agentPinned atomic.Pointer[func(cpu int)]
