package sys

import (
	"context"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The rdma_cm event channel is written, not read: every command, GET_EVENT
// included, is a write(2) whose response the kernel copies to the address
// inside the command. GET_EVENT on a non-blocking file answers EAGAIN while
// the queue is empty, and the file reports readability (EPOLLIN) when an
// event is queued; it never reports EPOLLOUT. So GET_EVENT must wait for
// *readability* and then write (WriteWhenReadable); File.Write or
// RawConn.Write would wait for writability and hang (cm-brief.md §7).

// WriteCmd issues one write(2) of b on the poller's descriptor, retrying
// EINTR: an rdma_cm command that does not wait for events (its EAGAIN, which
// no such command returns, is passed up). The write runs inside the
// descriptor's RawConn.Control, so Close cannot reuse the number meanwhile.
func (p *PollFD) WriteCmd(b Buf) error {
	if len(b.b) == 0 {
		return nil
	}
	select {
	case <-p.done:
		return ErrFDClosed
	default:
	}
	var werr error
	err := p.rc.Control(func(fd uintptr) {
		for {
			n, e := rawWrite(int(fd), b.b)
			if e == unix.EINTR {
				continue
			}
			werr = writeResult(n, e, len(b.b))
			return
		}
	})
	if err != nil {
		return p.mapErr(context.Background(), err)
	}
	return werr
}

// WriteWhenReadable issues the write(2) of b, and while it answers EAGAIN
// waits on the runtime poller until the descriptor is readable, then writes
// again: rdma_cm's GET_EVENT. It ends like Read: on ctx's cancellation
// (ctx.Err()), its deadline (context.DeadlineExceeded) or Close
// (ErrFDClosed). Callers are served one at a time, as Read's are.
func (p *PollFD) WriteWhenReadable(ctx context.Context, b Buf) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return ErrFDClosed
	}
	defer func() { <-p.turn }()

	dl, _ := ctx.Deadline()
	if err := p.f.SetReadDeadline(dl); err != nil {
		return p.mapErr(ctx, err)
	}
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
	var werr error
	err := p.rc.Read(func(fd uintptr) bool {
		for {
			n, e := rawWrite(int(fd), b.b)
			switch e {
			case unix.EAGAIN:
				return false
			case unix.EINTR:
				continue
			}
			werr = writeResult(n, e, len(b.b))
			return true
		}
	})
	if err != nil {
		return p.mapErr(ctx, err)
	}
	return werr
}

// rawWrite is write(2) of b on fd (b non-empty arena memory).
func rawWrite(fd int, b []byte) (uintptr, syscall.Errno) {
	n, _, e := unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return n, e
}
