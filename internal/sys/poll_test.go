package sys

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newPollPipe(t *testing.T) (*PollFD, *FD) {
	t.Helper()
	r, w, err := Pipe()
	require.NoError(t, err)
	p, err := NewPollFD(r, "test")
	require.NoError(t, err)
	require.Equal(t, -1, r.Int(), "ownership moved to the PollFD")
	t.Cleanup(func() { p.Close(); w.Close() })
	return p, w
}

// writeRecord may run on another goroutine: it reports through t.Error only.
func writeRecord(t *testing.T, w *FD, v uint64) {
	a, err := NewArena(8)
	if err != nil {
		t.Error(err)
		return
	}
	defer a.Close()
	b, _ := a.AllocBuf(8)
	binary.LittleEndian.PutUint64(b.Bytes(), v)
	if err := Write(w, b); err != nil {
		t.Error(err)
	}
}

func TestPollFDRead(t *testing.T) {
	p, w := newPollPipe(t)
	go func() {
		time.Sleep(10 * time.Millisecond)
		writeRecord(t, w, 42)
	}()
	var buf [8]byte
	n, err := p.Read(context.Background(), buf[:])
	require.NoError(t, err)
	require.Equal(t, 8, n)
	require.Equal(t, uint64(42), binary.LittleEndian.Uint64(buf[:]))
}

func TestPollFDDeadlineAndCancel(t *testing.T) {
	p, w := newPollPipe(t)
	var buf [8]byte
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Read(ctx, buf[:])
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel2)
	_, err = p.Read(ctx2, buf[:])
	require.ErrorIs(t, err, context.Canceled)

	// A cancelled read leaves no deadline behind for the next one.
	writeRecord(t, w, 7)
	_, err = p.Read(context.Background(), buf[:])
	require.NoError(t, err)
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(buf[:]))
}

func TestPollFDCloseWakesReaders(t *testing.T) {
	p, _ := newPollPipe(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf [8]byte
			_, err := p.Read(context.Background(), buf[:])
			errs <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, ErrFDClosed)
	}
}

// One reader's cancellation must not end another reader's wait.
func TestPollFDConcurrentReadersOwnDeadlines(t *testing.T) {
	p, w := newPollPipe(t)
	done := make(chan error, 1)
	go func() {
		var buf [8]byte
		_, err := p.Read(context.Background(), buf[:])
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	var buf [8]byte
	_, err := p.Read(ctx, buf[:])
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case err := <-done:
		t.Fatalf("the patient reader returned early: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	writeRecord(t, w, 1)
	require.NoError(t, <-done)
}

func TestPollFDShortRecord(t *testing.T) {
	p, w := newPollPipe(t)
	writeRecord(t, w, 1)
	var buf [16]byte
	_, err := p.Read(context.Background(), buf[:])
	require.ErrorContains(t, err, "short event read")
}

// A datagram read takes a record of any size and says how long it was.
func TestPollFDReadDatagram(t *testing.T) {
	p, w := newPollPipe(t)
	writeRecord(t, w, 0x0102030405060708)
	var buf [16]byte
	n, err := p.ReadDatagram(context.Background(), buf[:])
	require.NoError(t, err)
	require.Equal(t, 8, n)
	require.Equal(t, uint64(0x0102030405060708), binary.LittleEndian.Uint64(buf[:8]))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = p.ReadDatagram(ctx, buf[:])
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// After Close the number may already name another file: Int says -1.
func TestPollFDIntAfterClose(t *testing.T) {
	p, _ := newPollPipe(t)
	require.GreaterOrEqual(t, p.Int(), 0)
	require.NoError(t, p.Close())
	require.Equal(t, -1, p.Int())
	require.Equal(t, -1, (*PollFD)(nil).Int())
}
