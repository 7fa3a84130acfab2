package uverbs

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ibgo/ibgo/internal/sys"
)

// ErrDeviceFatal is wrapped by every command and post on a context whose
// device went away or failed (EventDeviceFatal was reported): the context
// and its objects can only be closed now. It wraps EIO, which is what the
// kernel answers once it has disassociated a context.
var ErrDeviceFatal = fmt.Errorf("device removed or failed: %w", sys.NewErrno(sys.EIO))

const fatalHint = "close the context and its objects; open the device again once it is back"

func fatalErr(dev, op string) error {
	return &Error{Op: op, Device: dev, Err: ErrDeviceFatal, Hint: fatalHint}
}

// Device removal.
//
// A driver with disassociate_ucontext (mlx5) lets the kernel tear a removed
// device's contexts down at once: it queues IB_EVENT_DEVICE_FATAL on the
// async event file and fails every later command with EIO. rxe has none: on
// `rdma link delete` (or its netdev going away) the kernel deletes the
// uverbs character device and then waits, in ib_uverbs_remove_one, until
// every process has closed its files of that device, telling them nothing.
// A program that does not notice holds the deletion up for ever (rdma-core
// programs do).
//
// ibgo notices: while contexts are open it listens to the kernel's uevents
// (NETLINK_KOBJECT_UEVENT, readable by any user) and, when the uverbs
// character device of an open context is removed, reports EventDeviceFatal
// on that context as the kernel would have, and fails its later commands
// and posts with ErrDeviceFatal, so that the program closes it and the
// kernel can finish the removal.

// removals is the process's one uevent listener, running while any context
// is open.
var removals struct {
	mu     sync.Mutex
	ctxs   map[*Context]string // open contexts by uverbs device name ("infiniband/uverbs0")
	fd     *sys.PollFD
	cancel context.CancelFunc
	done   chan struct{}
}

// watchRemoval registers c (just opened) with the listener, starting it
// for the first context. Without uevents (a kernel without them, a
// seccomp filter) removal goes unnoticed, as in rdma-core.
func (c *Context) watchRemoval() {
	name := strings.TrimPrefix(c.dev.UverbsPath, "/dev/")
	removals.mu.Lock()
	defer removals.mu.Unlock()
	if removals.ctxs == nil {
		removals.ctxs = map[*Context]string{}
	}
	if removals.fd == nil {
		fd, err := sys.NetlinkUevent()
		if err != nil {
			return
		}
		p, err := sys.NewPollFD(fd, "uevents")
		if err != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		removals.fd, removals.cancel, removals.done = p, cancel, make(chan struct{})
		go listenRemovals(ctx, p, removals.done)
	}
	removals.ctxs[c] = name
}

// unwatchRemoval takes c (being closed) off the list and stops the listener
// with the last context, so that no descriptor or goroutine outlives the
// contexts.
func (c *Context) unwatchRemoval() {
	removals.mu.Lock()
	delete(removals.ctxs, c)
	if len(removals.ctxs) > 0 || removals.fd == nil {
		removals.mu.Unlock()
		return
	}
	fd, cancel, done := removals.fd, removals.cancel, removals.done
	removals.fd, removals.cancel, removals.done = nil, nil, nil
	removals.mu.Unlock()
	cancel()
	<-done
	fd.Close()
}

func listenRemovals(ctx context.Context, fd *sys.PollFD, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 8192)
	for {
		n, err := fd.ReadDatagram(ctx, buf)
		if err != nil {
			if ctx.Err() == nil && sys.ErrnoOf(err) == sys.ENOBUFS {
				continue // messages lost in a burst: the next ones still count
			}
			return // cancelled, or the socket is unusable: stop listening
		}
		dev, ok := removedUverbs(buf[:n])
		if !ok {
			continue
		}
		removals.mu.Lock()
		var hit []*Context
		for c, name := range removals.ctxs {
			if name == dev {
				hit = append(hit, c)
			}
		}
		removals.mu.Unlock()
		for _, c := range hit {
			c.deviceFatal()
		}
	}
}

// removedUverbs parses a kernel uevent ("remove@/devices/...\0KEY=VALUE\0
// ...") and reports the device name of a removed uverbs character device
// ("infiniband/uverbs0").
func removedUverbs(msg []byte) (string, bool) {
	fields := bytes.Split(msg, []byte{0})
	if len(fields) == 0 || !bytes.HasPrefix(fields[0], []byte("remove@")) {
		return "", false // also skips udev's re-broadcasts ("libudev" header)
	}
	var action, subsystem, devname string
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(string(f), "=")
		if !ok {
			continue
		}
		switch k {
		case "ACTION":
			action = v
		case "SUBSYSTEM":
			subsystem = v
		case "DEVNAME":
			devname = v
		}
	}
	if action != "remove" || subsystem != "infiniband_verbs" || devname == "" {
		return "", false
	}
	return devname, true
}

// deviceFatal marks c's device as gone and wakes whoever waits for its
// async events; the first of them gets EventDeviceFatal.
func (c *Context) deviceFatal() {
	if c.fatal.Swap(true) {
		return
	}
	c.fatalPending.Store(true)
	if c.goneCancel != nil {
		c.goneCancel()
	}
}

// goneCtx is cancelled when the device goes away (never for a context
// made without Open, as in unit tests).
func (c *Context) goneCtx() context.Context {
	if c.gone == nil {
		return context.Background()
	}
	return c.gone
}

// Fatal reports whether the context's device went away or failed
// (EventDeviceFatal): everything but Close and Poll then fails with
// ErrDeviceFatal.
func (c *Context) Fatal() bool { return c.fatal.Load() }
