//go:build linux

package udp_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
	"github.com/ibgo/ibgo/internal/testutil"
)

// The two-guest tests: node 1 publishes, node 2 subscribes, each guest
// with its own ibgo driver, across the qemu link between them. Each guest
// puts tc netem on its end of the link (egress), so DATA, SMs and NAKs
// all meet real loss, delay, reordering and duplication in the kernel.
// Node 2 tells node 1 over TCP when it has every message.

// netemSpec: 5 % loss, 2 % duplication, a quarter of the packets sent at
// once while the rest wait 2 ms (so those overtake them: reordering).
var netemSpec = []string{"delay", "2ms", "reorder", "25%", "50%", "loss", "5%", "duplicate", "2%"}

// netem replaces the root qdisc of dev with netem for the test.
func netem(t *testing.T, dev string) {
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatalf("tc is not in the guest image: %v", err)
	}
	args := append([]string{"qdisc", "replace", "dev", dev, "root", "netem"}, netemSpec...)
	out, err := exec.Command("tc", args...).CombinedOutput()
	require.NoError(t, err, "tc %s: %s", strings.Join(args, " "), out)
	t.Cleanup(func() {
		out, _ := exec.Command("tc", "-s", "qdisc", "show", "dev", dev).CombinedOutput()
		t.Logf("netem on %s at the end: %s", dev, out) // packets sent and dropped
		_ = exec.Command("tc", "qdisc", "del", "dev", dev, "root").Run()
	})
}

// doneSignal: node 2 dials node 1's port and writes "done <n>"; node 1
// waits for it. The dial retries: node 1 may still be starting.
func sendDone(t *testing.T, peer string, port, n int) {
	var conn net.Conn
	var err error
	end := time.Now().Add(deadline)
	for {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(peer, strconv.Itoa(port)), time.Second)
		if err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "telling node 1 the subscriber is done")
	defer conn.Close()
	_, err = conn.Write([]byte("done " + strconv.Itoa(n) + "\n"))
	require.NoError(t, err)
}

func listenDone(t *testing.T, ip string, port int) net.Listener {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

func waitDone(t *testing.T, ln net.Listener, n int) {
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * deadline))
	conn, err := ln.Accept()
	require.NoError(t, err, "waiting for node 2 to report every message")
	defer conn.Close()
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "done "+strconv.Itoa(n)+"\n", line)
}

// receiveAll polls until n messages arrived, each once and in order.
func receiveAll(t *testing.T, sub *client.Subscription, n int) {
	require.NoError(t, receiveAllErr(sub, n))
}

// receiveAllErr is receiveAll for a goroutine other than the test's.
func receiveAllErr(sub *client.Subscription, n int) error {
	next, bad := 0, -1
	fh := func(payload []byte, _ *logbuffer.Header) {
		if got := int(binary.LittleEndian.Uint64(payload)); got != next && bad < 0 {
			bad = got
		}
		next++
	}
	end := time.Now().Add(2 * deadline)
	for next < n {
		if sub.Poll(fh, 256) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		if bad >= 0 {
			return fmt.Errorf("message %d arrived where %d was due: out of order or duplicated", bad, next-1)
		}
		if time.Now().After(end) {
			return fmt.Errorf("received %d of %d", next, n)
		}
	}
	return nil
}

func offerAll(t *testing.T, pub *client.Publication, n, size int) {
	msg := make([]byte, size)
	end := time.Now().Add(2 * deadline)
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if pub.Offer(msg) > 0 {
			i++
		} else {
			time.Sleep(50 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering: sent %d", i)
	}
}

const netemMessages = 10000 // 64 KiB terms: about 44 term rotations

func TestNetemUnicastTwoNodes(t *testing.T) {
	vm := testutil.TwoNodes(t)
	netem(t, vm.Netdev)
	d, _ := startDriver(t, udp.Loss{}, nil)
	c := connect(t, d.Dir())
	ctx := context.Background()
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, "aeron:udp?endpoint="+vm.IP+":21500", 1001)
		require.NoError(t, err)
		receiveAll(t, sub, netemMessages)
		require.Positive(t, systemCounter(t, d, "NAKs sent"), "the loss was repaired by NAKs")
		t.Logf("node 2: NAKs sent %d, invalid packets %d", systemCounter(t, d, "NAKs sent"), systemCounter(t, d, "Invalid packets"))
		sendDone(t, vm.Peer, 21510, netemMessages)
		return
	}
	ln := listenDone(t, vm.IP, 21510)
	pub, err := c.AddPublication(ctx, "aeron:udp?endpoint="+vm.Peer+":21500", 1001)
	require.NoError(t, err)
	waitFor(t, "the subscriber on node 2", pub.IsConnected)
	offerAll(t, pub, netemMessages, 256)
	waitDone(t, ln, netemMessages)
	require.Positive(t, systemCounter(t, d, "Retransmits sent"))
	t.Logf("node 1: retransmits sent %d", systemCounter(t, d, "Retransmits sent"))
}

// TestNetemMulticastTwoNodes: fc=min,g:/2 on a multicast group over the
// link: node 1 publishes and also subscribes in a second driver (its copy
// loops back and meets no netem); node 2 subscribes through the lossy
// link. The publisher waits for both, and both get every message.
func TestNetemMulticastTwoNodes(t *testing.T) {
	vm := testutil.TwoNodes(t)
	netem(t, vm.Netdev)
	ch := "aeron:udp?endpoint=224.0.7.11:21520|interface=" + vm.IP + "|ttl=1"
	ctx := context.Background()
	d, _ := startDriver(t, udp.Loss{}, nil)
	c := connect(t, d.Dir())
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		receiveAll(t, sub, netemMessages)
		require.Positive(t, systemCounter(t, d, "NAKs sent"))
		sendDone(t, vm.Peer, 21530, netemMessages)
		return
	}
	ln := listenDone(t, vm.IP, 21530)
	sd, _ := startDriver(t, udp.Loss{}, nil)
	sub, err := connect(t, sd.Dir()).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	pub, err := c.AddPublication(ctx, ch+"|fc=min,g:/2", 1001)
	require.NoError(t, err)
	waitFor(t, "both subscribers (fc=min,g:/2)", pub.IsConnected)
	done := make(chan error, 1)
	go func() { done <- receiveAllErr(sub, netemMessages) }()
	offerAll(t, pub, netemMessages, 256)
	require.NoError(t, <-done, "node 1's own subscriber")
	waitDone(t, ln, netemMessages)
	require.Positive(t, systemCounter(t, d, "Retransmits sent"))
}
