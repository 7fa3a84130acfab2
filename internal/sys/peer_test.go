//go:build linux

package sys

import (
	"net"
	"syscall"
	"testing"
	"time"
)

func rawConn(t *testing.T, c net.Conn) syscall.RawConn {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// A live peer, even one that has sent unread data, has not hung up; a peer
// that closes has, and the check neither blocks nor consumes the data.
func TestPeerHungUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	rc := rawConn(t, cli)
	if gone, err := PeerHungUp(rc); err != nil || gone {
		t.Fatalf("live peer: gone=%v err=%v", gone, err)
	}
	srv.Write([]byte("x"))
	time.Sleep(10 * time.Millisecond)
	if gone, err := PeerHungUp(rc); err != nil || gone {
		t.Fatalf("peer with data queued: gone=%v err=%v", gone, err)
	}
	srv.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		gone, err := PeerHungUp(rc)
		if err != nil {
			t.Fatal(err)
		}
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer's close was not seen")
		}
		time.Sleep(time.Millisecond)
	}
	var b [1]byte
	if n, err := cli.Read(b[:]); n != 1 || b[0] != 'x' {
		t.Fatalf("queued data was consumed: n=%d err=%v", n, err)
	}
	cli.Close()
	if _, err := PeerHungUp(rc); err == nil {
		t.Fatal("a closed socket must be an error")
	}
}
