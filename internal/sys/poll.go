package sys

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PollFD is an event file descriptor (a completion channel, the async event
// file) on the Go runtime poller: it is non-blocking, a Read parks the
// goroutine (no thread sits in read(2), nothing spins) and ends on context
// cancellation or deadline, in the manner of mdlayher/socket.
//
// All methods are safe for concurrent use. Concurrent Reads are served one at
// a time in arrival order; each one waits under its own context, and Close
// ends every waiting Read with ErrFDClosed.
type PollFD struct {
	f    *os.File
	rc   syscall.RawConn
	raw  int
	turn chan struct{} // one reader at a time owns the file's read deadline
	done chan struct{} // closed by Close
	once sync.Once
}

// ErrFDClosed is returned by PollFD.Read after (or during) Close.
var ErrFDClosed = os.ErrClosed

// NewPollFD takes ownership of fd, makes it non-blocking and registers it
// with the runtime poller. fd is closed when PollFD is (and also on error).
func NewPollFD(fd *FD, name string) (*PollFD, error) {
	raw := fd.release()
	if raw < 0 {
		return nil, NewErrno(EBADF)
	}
	if err := unix.SetNonblock(raw, true); err != nil {
		unix.Close(raw)
		return nil, fmt.Errorf("%s: set non-blocking: %w", name, errnoErr(err))
	}
	// os.NewFile registers a non-blocking descriptor with the poller.
	f := os.NewFile(uintptr(raw), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &PollFD{f: f, rc: rc, raw: raw, turn: make(chan struct{}, 1), done: make(chan struct{})}
	return p, nil
}

// Int returns the descriptor number (to pass it to the kernel in a command),
// or -1 once Close has begun: the number may then name another file.
func (p *PollFD) Int() int {
	if p == nil {
		return -1
	}
	select {
	case <-p.done:
		return -1
	default:
		return p.raw
	}
}

// Read reads one record into buf: a read(2) on an event file returns whole
// records, so anything but len(buf) bytes is an error. It waits on the poller
// until a record arrives, ctx is cancelled (ctx.Err()), ctx's deadline passes
// (context.DeadlineExceeded) or the file is closed (ErrFDClosed).
func (p *PollFD) Read(ctx context.Context, buf []byte) (int, error) {
	return p.read(ctx, buf, true)
}

// ReadDatagram is Read for a descriptor whose records vary in size (a
// netlink socket): it returns the length of the one it read, which is cut
// to len(buf) if longer.
func (p *PollFD) ReadDatagram(ctx context.Context, buf []byte) (int, error) {
	return p.read(ctx, buf, false)
}

func (p *PollFD) read(ctx context.Context, buf []byte, whole bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-p.done:
		return 0, ErrFDClosed
	}
	defer func() { <-p.turn }()

	dl, _ := ctx.Deadline() // zero: no deadline
	if err := p.f.SetReadDeadline(dl); err != nil {
		return 0, p.mapErr(ctx, err)
	}
	// Cancellation wakes the read by moving the deadline into the past. The
	// wake-up must be over before the turn passes on: run late, it would cut
	// short the next reader's wait.
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		p.f.SetReadDeadline(time.Unix(1, 0))
		close(woken)
	})
	defer func() {
		if !stop() {
			<-woken
		}
	}()
	var n int
	var rerr error
	err := p.rc.Read(func(fd uintptr) bool {
		var err error
		n, err = unix.Read(int(fd), buf)
		if err == unix.EAGAIN {
			return false
		}
		switch {
		case err != nil:
			rerr = errnoErr(err)
		case whole && n != len(buf):
			rerr = fmt.Errorf("short event read: %d of %d bytes", n, len(buf))
		}
		return true
	})
	if err != nil {
		return 0, p.mapErr(ctx, err)
	}
	return n, rerr
}

func (p *PollFD) mapErr(ctx context.Context, err error) error {
	select {
	case <-p.done: // os reports a read ended by Close as "use of closed file"
		return ErrFDClosed
	default:
	}
	if ce := ctx.Err(); ce != nil {
		return ce
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, os.ErrClosed) {
		return ErrFDClosed
	}
	return err
}

// Close closes the descriptor and ends waiting Reads. It is idempotent.
func (p *PollFD) Close() error {
	if p == nil {
		return nil
	}
	var err error
	p.once.Do(func() {
		close(p.done)
		if e := p.f.Close(); e != nil && !errors.Is(e, os.ErrClosed) {
			err = e
		}
	})
	return err
}
