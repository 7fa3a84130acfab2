package sys

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
)

func udpPair(t *testing.T, network, addr string) (*net.UDPConn, *net.UDPConn) {
	t.Helper()
	a, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Skipf("listen %s %s: %v", network, addr, err)
	}
	b, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		a.Close()
		t.Skipf("listen %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func batchOf(t *testing.T, c *net.UDPConn, n int) *MsgBatch {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMsgBatch(rc, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMsgBatchRoundTrip sends a batch with sendmmsg and reads it back with
// recvmmsg: every datagram, its length, its order and the sender address,
// on an IPv4 socket and on a dual-stack (wildcard) one.
func TestMsgBatchRoundTrip(t *testing.T) {
	for _, tc := range []struct{ name, bind, dst string }{
		{"v4", "127.0.0.1:0", "127.0.0.1"},
		{"dual-stack", "0.0.0.0:0", "127.0.0.1"},
		{"v6", "[::1]:0", "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := udpPair(t, "udp", tc.bind)
			sb, rb := batchOf(t, a, 8), batchOf(t, b, 8)
			dst := netip.AddrPortFrom(netip.MustParseAddr(tc.dst), b.LocalAddr().(*net.UDPAddr).AddrPort().Port())
			var msgs [][]byte
			for i := range 5 {
				msgs = append(msgs, bytes.Repeat([]byte{byte(i + 1)}, 10+i*100))
			}
			n, err := sb.Send(dst, msgs)
			if err != nil || n != len(msgs) {
				t.Fatalf("Send = %d, %v; want %d", n, err, len(msgs))
			}
			bufs := make([][]byte, 8)
			for i := range bufs {
				bufs[i] = make([]byte, 2048)
			}
			got := 0
			for try := 0; got < len(msgs) && try < 1000; try++ {
				k, err := rb.Recv(bufs[got:])
				if err != nil {
					t.Fatal(err)
				}
				for i := range k {
					if !bytes.Equal(bufs[got+i][:rb.Len(i)], msgs[got+i]) {
						t.Fatalf("datagram %d: %d bytes, want %d of %d", got+i, rb.Len(i), len(msgs[got+i]), got+i+1)
					}
					if from := rb.From(i); from.Port() != a.LocalAddr().(*net.UDPAddr).AddrPort().Port() || !from.Addr().Unmap().IsLoopback() {
						t.Fatalf("datagram %d from %s, want the sender's loopback port %s", got+i, from, a.LocalAddr())
					}
				}
				got += k
				if k == 0 {
					runtime.Gosched()
				}
			}
			if got != len(msgs) {
				t.Fatalf("received %d datagrams, want %d", got, len(msgs))
			}
			if k, err := rb.Recv(bufs); k != 0 || err != nil {
				t.Fatalf("Recv on an empty socket = %d, %v; want 0, nil (EAGAIN)", k, err)
			}
		})
	}
}

// TestMsgBatchErrors: the errors say what and where.
func TestMsgBatchErrors(t *testing.T) {
	a, _ := udpPair(t, "udp4", "127.0.0.1:0")
	sb := batchOf(t, a, 4)
	if _, err := sb.Send(netip.AddrPort{}, [][]byte{{1}}); err == nil {
		t.Fatal("Send to no address: no error")
	}
	if _, err := sb.Send(netip.MustParseAddrPort("[2001:db8::1]:9"), [][]byte{{1}}); err == nil {
		t.Fatal("Send of an IPv6 destination on an IPv4 socket: no error")
	}
	// a datagram larger than UDP allows fails with EMSGSIZE, named
	big := make([]byte, 70000)
	n, err := sb.Send(netip.MustParseAddrPort("127.0.0.1:9"), [][]byte{{1}, big})
	if err == nil || n != 1 {
		t.Fatalf("Send of an oversize second datagram = %d, %v; want 1 and an error", n, err)
	}
	if want := "datagram 2 of 2"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %q does not name %q", err, want)
	}
	if _, err := NewMsgBatch(nil, 0); err == nil {
		t.Fatal("NewMsgBatch(0): no error")
	}
}

// TestMsgBatchNoAllocs: a send and a receive of a batch allocate nothing.
func TestMsgBatchNoAllocs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the allocation-free batch is Linux only")
	}
	a, b := udpPair(t, "udp4", "127.0.0.1:0")
	sb, rb := batchOf(t, a, 16), batchOf(t, b, 16)
	dst := b.LocalAddr().(*net.UDPAddr).AddrPort()
	msgs := make([][]byte, 16)
	bufs := make([][]byte, 16)
	for i := range msgs {
		msgs[i] = make([]byte, 256)
		bufs[i] = make([]byte, 2048)
	}
	var sum int
	allocs := testing.AllocsPerRun(200, func() {
		n, err := sb.Send(dst, msgs)
		if err != nil {
			panic(fmt.Sprint(err))
		}
		for got := 0; got < n; {
			k, err := rb.Recv(bufs)
			if err != nil {
				panic(fmt.Sprint(err))
			}
			for i := range k {
				sum += rb.Len(i) + int(rb.From(i).Port())
			}
			got += k
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch, want 0", allocs)
	}
	if sum == 0 {
		t.Fatal("nothing received")
	}
}
