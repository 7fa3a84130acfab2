//go:build linux

package ib_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// TestIBSendPath drives two transports directly (no driver): datagrams in
// registered memory go out without a copy, small ones inline, one in Go
// memory through the bounce buffer; all arrive once, in order, intact and
// with a media receive timestamp; a batch of 16 posts and its receipt
// allocate nothing; releasing the region waits for its sends.
func TestIBSendPath(t *testing.T) { testSendPath(t, 24577, "") }

// TestIBRCSendPath is TestIBSendPath over ib-qp=rc: a publication's
// connection posts from the registered log as UD does.
func TestIBRCSendPath(t *testing.T) { testSendPath(t, 24578, "|ib-qp=rc") }

func testSendPath(t *testing.T, port int, params string) {
	vm := testutil.OneNode(t)
	m := ib.New()
	ep := fmt.Sprintf("%s:%d", vm.IP, port)
	ch, err := uri.Parse("aeron:ib?endpoint=" + ep + "|mtu=4096" + params)
	require.NoError(t, err)
	bind := netip.MustParseAddrPort(ep)
	rx, err := m.Open(ch, bind, netip.AddrPort{}, driver.TransportParams{SocketRcvbuf: 1 << 20, MTU: 4096, MediaTimestamps: true}, driver.AffinityReceiver)
	require.NoError(t, err)
	defer rx.Close()
	tx, err := m.Open(ch, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), bind, driver.TransportParams{MTU: 1024}, driver.AffinitySender)
	require.NoError(t, err)
	defer tx.Close()

	mem, err := uverbs.AllocMemory(1<<20, uverbs.MemoryOptions{})
	require.NoError(t, err)
	defer mem.Close()
	reg, ok := tx.(driver.MemoryRegistrar)
	require.True(t, ok, "the ib transport registers memory")
	release, err := reg.RegisterMemory(mem.Bytes(), 64<<10)
	require.NoError(t, err)

	const batch, size = 16, 1024
	b := mem.Bytes()
	datagrams := make([][]byte, batch)
	seq, next := uint64(0), uint64(0)
	fill := func() {
		for i := range datagrams {
			d := b[(int(seq)%512)*size : (int(seq)%512+1)*size]
			binary.LittleEndian.PutUint64(d, seq)
			for j := 8; j < size; j++ {
				d[j] = byte(seq) + byte(j)
			}
			datagrams[i] = d
			seq++
		}
	}
	var bad, noTS int
	recv := func(_ driver.Transport, buf []byte, _ netip.AddrPort, ts int64) {
		if ts == 0 {
			noTS++
		}
		if len(buf) == size {
			got := binary.LittleEndian.Uint64(buf)
			if got != next || buf[size-1] != byte(got+size-1) {
				bad++
			}
			next++
			return
		}
		next++ // the small and the Go-memory datagram count in the sequence too
	}
	drain := func(want uint64) {
		end := time.Now().Add(10 * time.Second)
		for next < want && time.Now().Before(end) {
			_, _ = rx.Recv(64, recv)
			_, _ = tx.Recv(64, recv) // reaps send completions
		}
	}
	send := func() {
		fill()
		n, err := tx.Send(netip.AddrPort{}, datagrams)
		if err != nil || n != batch {
			bad++
		}
		drain(seq)
	}
	for i := 0; i < 200; i++ {
		send()
	}
	require.Zero(t, bad, "a datagram lost, reordered, corrupted or not sent")
	require.Equal(t, seq, next)

	// inline (a small control frame) and copied (Go heap memory) datagrams
	small, heap := make([]byte, 32), make([]byte, 600)
	n, err := tx.Send(netip.AddrPort{}, [][]byte{small, heap})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	seq += 2
	drain(seq)
	require.Equal(t, seq, next)
	require.Zero(t, noTS, "a datagram without a media receive timestamp")

	allocs := testing.AllocsPerRun(50, send)
	require.Zero(t, bad)
	require.Zero(t, allocs, "a batched send and its receipt allocate")

	require.NoError(t, release())
	require.Greater(t, m.ZeroCopy.Load(), int64(3000))
	require.Equal(t, int64(1), m.Inline.Load())
	require.Equal(t, int64(1), m.Copied.Load())
	require.Zero(t, m.RegisterErrors.Load())
	require.Zero(t, m.SendErrors.Load())
	require.Zero(t, m.RecvErrors.Load())
	require.Zero(t, m.RC.Dropped.Load()+m.RC.Lost.Load())
	t.Logf("zero-copy %d, inline %d, copied %d datagrams", m.ZeroCopy.Load(), m.Inline.Load(), m.Copied.Load())

	// after release the region's datagrams are copied
	fill()
	n, err = tx.Send(netip.AddrPort{}, datagrams)
	require.NoError(t, err)
	require.Equal(t, batch, n)
	drain(seq)
	require.Equal(t, seq, next)
	require.Equal(t, int64(1+batch), m.Copied.Load())
}
