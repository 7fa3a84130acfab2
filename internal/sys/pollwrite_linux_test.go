package sys

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A socket pair stands in for the rdma_cm file: our end's writes answer
// EAGAIN once its send buffer is full (GET_EVENT with no event queued), and
// it turns readable when the peer writes (an event arrives).
func TestPollFDWriteWhenReadable(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	peer := NewFD(fds[1])
	defer peer.Close()
	p, err := NewPollFD(NewFD(fds[0]), "socketpair")
	require.NoError(t, err)
	defer p.Close()
	a, err := NewArena(64 << 10)
	require.NoError(t, err)
	defer a.Close()
	chunk, _ := a.AllocBuf(4096)
	for {
		err := p.WriteCmd(chunk)
		if errors.Is(err, EAGAIN) {
			break
		}
		require.NoError(t, err)
	}

	// Not readable: the wait ends with the deadline, not by spinning on EAGAIN.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	require.ErrorIs(t, p.WriteWhenReadable(ctx, chunk), context.DeadlineExceeded)
	cancel()
	require.Less(t, time.Since(start), 2*time.Second)

	// The peer drains our writes (room again, but no readability edge) and
	// then writes to us (readable): only then is the write retried.
	done := make(chan error, 1)
	go func() { done <- p.WriteWhenReadable(context.Background(), chunk) }()
	time.Sleep(50 * time.Millisecond) // let it try, fail with EAGAIN and park
	buf := make([]byte, 64<<10)
	for {
		n, err := Read(peer, buf)
		if errors.Is(err, EAGAIN) || n < len(buf) {
			break
		}
		require.NoError(t, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the write went ahead without readability: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	one, _ := a.AllocBuf(1)
	require.NoError(t, Write(peer, one))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not follow readability")
	}

	// Close ends a waiting writer: full again and nothing to read.
	for {
		err := p.WriteCmd(chunk)
		if errors.Is(err, EAGAIN) {
			break
		}
		require.NoError(t, err)
	}
	var b1 [1]byte
	_, err = p.Read(context.Background(), b1[:])
	require.NoError(t, err)
	go func() { done <- p.WriteWhenReadable(context.Background(), one) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the write went ahead: %v", err)
	default:
	}
	require.NoError(t, p.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrFDClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting write")
	}
	require.ErrorIs(t, p.WriteCmd(one), ErrFDClosed)
}
