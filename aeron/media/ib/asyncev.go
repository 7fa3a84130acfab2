package ib

// Asynchronous events. Some failures reach the program only as an event
// on the device context, not through a poll: a CQ overrun (rxe drops the
// completion and raises CQ_ERR, moving the QP that completed to error;
// mlx5 puts the CQ in error, after which it simply yields nothing), an SRQ
// in error, a catastrophic QP error, a failed port or device. The medium
// therefore reads the async events of every device context its CQs live
// on (one goroutine per context while it has CQs there), counts them in
// Media.AsyncEvents, hands a CQ_ERR or SRQ_ERR to the transport that owns
// the queue as a failure of that queue (the agent's next poll fails and
// the usual rebuild follows, cqerror.go), and writes the others that mean
// something went wrong to the error log with the device and the event.
// Each event goes to one reader of the context: the medium assumes it is
// the only one in its process reading the contexts cm opened for it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// errCQEvent is the failure a CQ_ERR (or SRQ_ERR) event makes the next
// poll of that queue's owner return.
var errCQEvent = errors.New("the device reported a CQ error (asynchronous event CQ_ERR: an overrun, or the device failed)")

var errSRQEvent = errors.New("the device reported an SRQ error (asynchronous event SRQ_ERR)")

// asyncWatch is the Media's async-event readers and the queues they watch.
type asyncWatch struct {
	mu     sync.Mutex
	ctxs   map[*uverbs.Context]*ctxWatcher
	queues map[any]*atomic.Bool // *uverbs.CQ or *uverbs.SRQ -> its owner's flag
	// down are the ports a PORT_ERR said went down and no PORT_ACTIVE
	// brought back; anyDown says down is not empty (read without the
	// lock on every CM attempt)
	down    map[portRef]bool
	anyDown atomic.Bool
	checked time.Time // when down was last checked against the ports
	// used are the ports the medium's UD endpoints have lived on: their
	// state is read too, in case no reader saw their PORT_ERR
	used map[portRef]bool
}

// usePort records a port an endpoint lives on (fabricDown checks it).
func (m *Media) usePort(dev string, port int) {
	w := &m.async
	w.mu.Lock()
	if w.used == nil {
		w.used = map[portRef]bool{}
	}
	w.used[portRef{dev, port}] = true
	w.mu.Unlock()
}

// portActive reads a port's state from sysfs (no context needed); an
// unreadable state counts as active: nothing to hold for.
func portActive(p portRef) bool {
	b, err := os.ReadFile(filepath.Join(uverbs.SysfsRoot, "class/infiniband", p.dev, "ports", strconv.Itoa(p.port), "state"))
	return err != nil || strings.Contains(string(b), "ACTIVE")
}

// portRef names a device's port.
type portRef struct {
	dev  string
	port int
}

// portCheckEvery is how often fabricDown reads the ports' states (sysfs)
// itself: a port can go down without a PORT_ERR reaching the medium (no
// reader of that device's events at the time), and a CM exchange started
// in the first moments of an outage is what wedges soft-RoCE's QP1.
const portCheckEvery = 10 * time.Millisecond

// fabricDown says a port the medium's devices reported down (PORT_ERR)
// is not back yet. While it is, the medium starts no RDMA CM exchange
// (SIDR, connect): on soft-RoCE (kernel 6.1) a CM MAD posted while the
// port is down stalls the port's QP1 for good and every later CM exchange
// on the host times out, this process's and others' (TestIBFlapProbe,
// docs/aeron.md "Link outages"); the exchange is tried once the port is
// ACTIVE again. Any goroutine.
func (m *Media) fabricDown() bool {
	w := &m.async
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) < portCheckEvery {
		return len(w.down) > 0
	}
	w.checked = time.Now()
	if w.down == nil {
		w.down = map[portRef]bool{}
	}
	for p := range w.used {
		if !portActive(p) {
			w.down[p] = true // no reader saw its PORT_ERR
		}
	}
	for p := range w.down {
		if portActive(p) {
			delete(w.down, p)
		}
	}
	w.anyDown.Store(len(w.down) > 0)
	return len(w.down) > 0
}

// portEvent records a port going down or coming back.
func (m *Media) portEvent(dev string, port int, down bool) {
	w := &m.async
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down == nil {
		w.down = map[portRef]bool{}
	}
	if down {
		w.down[portRef{dev, port}] = true
		w.checked = time.Now()
	} else {
		delete(w.down, portRef{dev, port})
	}
	w.anyDown.Store(len(w.down) > 0)
}

// ctxWatcher reads one context's events while refs queues are watched.
type ctxWatcher struct {
	refs   int
	cancel context.CancelFunc
	done   chan struct{}
}

// watchCQ makes a CQ_ERR event about cq set failed (the owner checks it
// when it polls). vctx is the context cq lives on. Safe for concurrent
// use.
func (m *Media) watchCQ(vctx *uverbs.Context, cq *uverbs.CQ, failed *atomic.Bool) {
	if cq != nil {
		m.watch(vctx, cq, failed)
	}
}

// watchSRQ is watchCQ for an SRQ (SRQ_ERR).
func (m *Media) watchSRQ(vctx *uverbs.Context, srq *uverbs.SRQ, failed *atomic.Bool) {
	if srq != nil {
		m.watch(vctx, srq, failed)
	}
}

func (m *Media) watch(vctx *uverbs.Context, q any, failed *atomic.Bool) {
	if vctx == nil {
		return
	}
	w := &m.async
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queues == nil {
		w.queues = map[any]*atomic.Bool{}
	}
	if _, ok := w.queues[q]; !ok {
		w.ref(m, vctx)
	}
	w.queues[q] = failed
}

// unwatchCQ forgets cq (before it is destroyed, or with it); the last
// queue of a context stops its reader.
func (m *Media) unwatchCQ(vctx *uverbs.Context, cq *uverbs.CQ) {
	if cq != nil {
		m.unwatch(vctx, cq)
	}
}

// unwatchSRQ is unwatchCQ for an SRQ.
func (m *Media) unwatchSRQ(vctx *uverbs.Context, srq *uverbs.SRQ) {
	if srq != nil {
		m.unwatch(vctx, srq)
	}
}

func (m *Media) unwatch(vctx *uverbs.Context, q any) {
	w := &m.async
	w.mu.Lock()
	_, ok := w.queues[q]
	delete(w.queues, q)
	var stop *ctxWatcher
	if ok {
		stop = w.unref(vctx)
	}
	w.mu.Unlock()
	stop.wait()
}

// ref counts one more watched queue on vctx, starting its reader. w.mu
// is held.
func (w *asyncWatch) ref(m *Media, vctx *uverbs.Context) {
	if w.ctxs == nil {
		w.ctxs = map[*uverbs.Context]*ctxWatcher{}
	}
	cw := w.ctxs[vctx]
	if cw == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cw = &ctxWatcher{cancel: cancel, done: make(chan struct{})}
		w.ctxs[vctx] = cw
		go m.readEvents(ctx, vctx, cw.done)
	}
	cw.refs++
}

// unref counts one watched queue less; the watcher to wait for (outside
// w.mu) when it was the last.
func (w *asyncWatch) unref(vctx *uverbs.Context) *ctxWatcher {
	cw := w.ctxs[vctx]
	if cw == nil {
		return nil
	}
	if cw.refs--; cw.refs > 0 {
		return nil
	}
	delete(w.ctxs, vctx)
	cw.cancel()
	return cw
}

func (cw *ctxWatcher) wait() {
	if cw != nil {
		<-cw.done
	}
}

// readEvents reads vctx's events until ctx ends or the context closes.
func (m *Media) readEvents(ctx context.Context, vctx *uverbs.Context, done chan<- struct{}) {
	defer close(done)
	dev := vctx.Device().Name
	for {
		ev, err := vctx.GetAsyncEvent(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, uverbs.ErrClosed) || errors.Is(err, uverbs.ErrDeviceFatal) {
				return
			}
			select { // a read error that is not the end: do not spin
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		m.AsyncEvents.Add(1)
		switch ev.Type {
		case uverbs.EventPortErr:
			m.portEvent(dev, ev.Port, true)
		case uverbs.EventPortActive:
			m.portEvent(dev, ev.Port, false)
		}
		m.onEvent(dev, ev)
	}
}

// onEvent dispatches one event (see the top of the file).
func (m *Media) onEvent(dev string, ev uverbs.AsyncEvent) {
	w := &m.async
	switch ev.Type {
	case uverbs.EventCQErr, uverbs.EventSRQErr:
		var q any = ev.CQ
		if ev.Type == uverbs.EventSRQErr {
			q = ev.SRQ
		}
		w.mu.Lock()
		f := w.queues[q]
		w.mu.Unlock()
		if f != nil {
			f.Store(true)
			return
		}
	case uverbs.EventQPFatal, uverbs.EventQPReqErr, uverbs.EventQPAccessErr, uverbs.EventWQFatal:
		// the QP is in error: its flushed work requests tell its owner,
		// which restarts or drops it; the cause goes to the log here
	case uverbs.EventDeviceFatal, uverbs.EventPortErr:
	default:
		return // informational (port active, communication established, ...)
	}
	m.report(fmt.Errorf("ib: device %s reported %q (asynchronous event %d)", dev, ev.Type.String(), ev.Type))
}
