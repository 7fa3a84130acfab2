package udp_test

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/udp"
	"github.com/ibgo/ibgo/aeron/uri"
)

func openPair(t *testing.T, loss udp.Loss) (tx, rx driver.Transport, rxAddr netip.AddrPort) {
	t.Helper()
	ch, err := uri.Parse("aeron:udp?endpoint=127.0.0.1:0")
	require.NoError(t, err)
	m := udp.New(loss)
	p := driver.TransportParams{MTU: 1408}
	rx, err = m.Open(ch, netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{}, p, driver.AffinityReceiver)
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close() })
	rxAddr = netip.MustParseAddrPort(rx.LocalAddr())
	tx, err = m.Open(ch, netip.MustParseAddrPort("127.0.0.1:0"), rxAddr, p, driver.AffinitySender)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	return tx, rx, rxAddr
}

// TestBatchedSendRecv: one Send of more datagrams than a sendmmsg batch
// takes and Recv calls of at most max each deliver every datagram once, in
// order, from the sender's address; a Recv of an empty socket returns 0.
func TestBatchedSendRecv(t *testing.T) {
	tx, rx, _ := openPair(t, udp.Loss{})
	const n = 40
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = make([]byte, 64+i)
		msgs[i][0] = byte(i)
	}
	sent, err := tx.Send(netip.AddrPort{}, msgs) // the connected peer
	require.NoError(t, err)
	require.Equal(t, n, sent)
	var got []int
	txAddr := netip.MustParseAddrPort(tx.LocalAddr())
	fn := func(_ driver.Transport, b []byte, from netip.AddrPort, _ int64) {
		require.Equal(t, txAddr, from)
		require.Len(t, b, 64+int(b[0]))
		got = append(got, int(b[0]))
	}
	for try := 0; len(got) < n && try < 10000; try++ {
		k, err := rx.Recv(7, fn)
		require.NoError(t, err)
		require.LessOrEqual(t, k, 7, "Recv handed more than max")
		if k == 0 {
			runtime.Gosched()
		}
	}
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, i, v, "datagram %d out of order", i)
	}
	k, err := rx.Recv(32, fn)
	require.NoError(t, err)
	require.Zero(t, k)
}

// TestBatchedIONoAllocs: a duty cycle's worth of sending and receiving
// allocates nothing per datagram.
func TestBatchedIONoAllocs(t *testing.T) {
	tx, rx, dst := openPair(t, udp.Loss{})
	msgs := make([][]byte, 16)
	for i := range msgs {
		msgs[i] = make([]byte, 256)
	}
	total := 0
	fn := func(_ driver.Transport, b []byte, _ netip.AddrPort, _ int64) { total += len(b) }
	allocs := testing.AllocsPerRun(200, func() {
		n, err := tx.Send(dst, msgs)
		if err != nil || n != len(msgs) {
			panic(err)
		}
		for got := 0; got < n; {
			k, err := rx.Recv(32, fn)
			if err != nil {
				panic(err)
			}
			got += k
		}
	})
	require.Zero(t, allocs, "allocations per send+receive of 16 datagrams")
	require.Equal(t, 201*16*256, total)
}

// TestSendErrorSaysWhere: a failing send reports the transport and the
// destination and how many datagrams went before it.
func TestSendErrorSaysWhere(t *testing.T) {
	tx, _, dst := openPair(t, udp.Loss{})
	n, err := tx.Send(dst, [][]byte{make([]byte, 10), make([]byte, 70000)})
	require.Error(t, err)
	require.Equal(t, 1, n)
	require.Contains(t, err.Error(), tx.LocalAddr())
	require.Contains(t, err.Error(), dst.String())
	require.Contains(t, err.Error(), "datagram 2 of 2")
}
