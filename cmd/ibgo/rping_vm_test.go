//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

func rpingTool(t *testing.T) string {
	p, err := exec.LookPath("rping")
	if err != nil {
		if testutil.Required() {
			t.Fatalf("REQUIRE_VM=1 but Debian's rping (rdmacm-utils) is not installed")
		}
		t.Skip("rping not installed")
	}
	return p
}

// syncBuffer is a bytes.Buffer several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goRping runs ibgo rping in this process.
func goRping(ctx context.Context, args ...string) (code int, stdout, stderr *syncBuffer) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	return runRpingCtx(ctx, args, stdout, stderr), stdout, stderr
}

// pingLines checks n "ping data: rdma-ping-i: ..." lines with rping's
// buffer contents for size.
func pingLines(t *testing.T, out, prefix string, n, size int) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, n, "%s", out)
	start := byte('A')
	for i, l := range lines {
		b := make([]byte, size)
		rpingFill(b, i, start)
		start++
		if start > 'z' {
			start = 'A'
		}
		require.Equal(t, prefix+string(cstr(b)), l)
	}
}

// retry runs f until it succeeds or 20 s pass (the peer's server may not
// listen yet: rping's client does not retry).
func retry(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after 20 s: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Debian's rping server, ibgo rping client with -V: the data check passes
// and the server saw every ping.
func TestRpingGoClientCServer(t *testing.T) {
	vm := testutil.OneNode(t)
	tool := rpingTool(t)
	before := testutil.Take()
	for _, size := range []int{64, 1000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			port := strconv.Itoa(17180 + size%7)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, tool, "-s", "-a", vm.IP, "-p", port, "-v", "-S", strconv.Itoa(size))
			var sout, serr bytes.Buffer
			srv.Stdout, srv.Stderr = &sout, &serr
			require.NoError(t, srv.Start())
			var out *syncBuffer
			retry(t, func() error {
				code, o, e := goRping(ctx, "-c", "-a", vm.IP, "-p", port, "-C", "10", "-v", "-V", "-S", strconv.Itoa(size))
				out = o
				if code != 0 {
					return fmt.Errorf("exit %d: %s", code, e)
				}
				return nil
			})
			pingLines(t, out.String(), "ping data: ", 10, size)
			require.NoError(t, srv.Wait(), "C server: %s %s", sout.String(), serr.String())
			pingLines(t, sout.String(), "server ping data: ", 10, size)
			require.Contains(t, serr.String(), "server DISCONNECT EVENT...")
		})
	}
	require.Empty(t, before.Diff(testutil.Take()), "fds or kernel objects left")
}

// ibgo rping server, Debian's rping client with -V.
func TestRpingGoServerCClient(t *testing.T) {
	vm := testutil.OneNode(t)
	tool := rpingTool(t)
	before := testutil.Take()
	for _, size := range []int{64, 4000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			port := strconv.Itoa(17190 + size%7)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			type res struct {
				code     int
				out, err *syncBuffer
			}
			done := make(chan res, 1)
			go func() {
				c, o, e := goRping(ctx, "-s", "-a", vm.IP, "-p", port, "-v", "-S", strconv.Itoa(size))
				done <- res{c, o, e}
			}()
			var out []byte
			retry(t, func() error {
				// stdout alone: it is block-buffered into the pipe, and
				// stderr's unbuffered lines would land inside a long line.
				cmd := exec.CommandContext(ctx, tool, "-c", "-a", vm.IP, "-p", port, "-C", "7", "-v", "-V", "-S", strconv.Itoa(size))
				var serr bytes.Buffer
				cmd.Stderr = &serr
				var err error
				out, err = cmd.Output()
				if err != nil {
					return fmt.Errorf("%v: %s %s", err, out, serr.String())
				}
				return nil
			})
			pingLines(t, string(out), "ping data: ", 7, size)
			r := <-done
			require.Equal(t, 0, r.code, "ibgo server: %s", r.err)
			pingLines(t, r.out.String(), "server ping data: ", 7, size)
			require.Contains(t, r.err.String(), "server DISCONNECT EVENT...")
		})
	}
	require.Empty(t, before.Diff(testutil.Take()), "fds or kernel objects left")
}

// A C client killed mid-run: the ibgo server sees the disconnect, ends, and
// releases everything.
func TestRpingPeerKilled(t *testing.T) {
	vm := testutil.OneNode(t)
	tool := rpingTool(t)
	before := testutil.Take()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan int, 1)
	var sout *syncBuffer
	go func() {
		c, o, e := goRping(ctx, "-s", "-a", vm.IP, "-p", "17200", "-v")
		sout = o
		t.Logf("ibgo server exit %d, stderr: %s", c, e)
		done <- c
	}()
	var cli *exec.Cmd
	retry(t, func() error {
		cli = exec.CommandContext(ctx, tool, "-c", "-a", vm.IP, "-p", "17200", "-v") // pings forever
		var out syncBuffer
		cli.Stdout = &out
		if err := cli.Start(); err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), "rdma-ping-3:") {
			if time.Now().After(deadline) {
				cli.Process.Kill()
				cli.Wait()
				return fmt.Errorf("no pings: %s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	require.NoError(t, cli.Process.Signal(syscall.SIGKILL))
	cli.Wait()
	select {
	case code := <-done:
		// 0 when the kill shows as the disconnect (flushed work requests);
		// on 6.12 an RDMA READ/WRITE in flight may fail first with a
		// remote error instead (rping reports that, exit 255).
		require.Contains(t, []int{0, 255}, code)
		require.Contains(t, sout.String(), "server ping data: rdma-ping-3:")
	case <-time.After(30 * time.Second):
		t.Fatal("the ibgo server did not notice the killed client within 30 s")
	}
	require.Empty(t, before.Diff(testutil.Take()), "fds or kernel objects left")
}

// Across the two guests: node 1 serves with ibgo then with C, node 2 pings
// with C then with ibgo.
func TestTwoNodeRping(t *testing.T) {
	vm := testutil.TwoNodes(t)
	tool := rpingTool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	t.Run("ibgo server, C client", func(t *testing.T) {
		if vm.Node == 1 {
			code, out, e := goRping(ctx, "-s", "-a", vm.IP, "-p", "17210", "-v")
			require.Equal(t, 0, code, "%s", e)
			pingLines(t, out.String(), "server ping data: ", 5, 64)
			return
		}
		retry(t, func() error {
			out, err := exec.CommandContext(ctx, tool, "-c", "-a", vm.Peer, "-p", "17210", "-C", "5", "-v", "-V").Output()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			pingLines(t, string(out), "ping data: ", 5, 64)
			return nil
		})
	})
	t.Run("C server, ibgo client", func(t *testing.T) {
		if vm.Node == 1 {
			out, err := exec.CommandContext(ctx, tool, "-s", "-a", vm.IP, "-p", "17211", "-v").Output()
			require.NoError(t, err, "%s", out)
			pingLines(t, string(out), "server ping data: ", 5, 64)
			return
		}
		retry(t, func() error {
			code, out, e := goRping(ctx, "-c", "-a", vm.Peer, "-p", "17211", "-C", "5", "-v", "-V")
			if code != 0 {
				return fmt.Errorf("exit %d: %s", code, e)
			}
			pingLines(t, out.String(), "ping data: ", 5, 64)
			return nil
		})
	})
}

// A persistent ibgo server (-P) serves Debian clients one after another
// (one with a source address), then ibgo's client with a source address and
// a TOS, until its context ends.
func TestRpingPersistentServer(t *testing.T) {
	vm := testutil.OneNode(t)
	tool := rpingTool(t)
	before := testutil.Take()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var sout *syncBuffer
	go func() {
		c, o, _ := goRping(sctx, "-s", "-P", "-a", vm.IP, "-p", "17220", "-v")
		sout = o
		done <- c
	}()
	for i, extra := range [][]string{nil, {"-I", vm.IP}} { // Debian's rping (44) has no -t
		retry(t, func() error {
			args := append([]string{"-c", "-a", vm.IP, "-p", "17220", "-C", "3", "-v", "-V"}, extra...)
			out, err := exec.CommandContext(ctx, tool, args...).Output()
			if err != nil {
				return fmt.Errorf("client %d: %v: %s", i, err, out)
			}
			pingLines(t, string(out), "ping data: ", 3, 64)
			return nil
		})
	}
	// And ibgo's own client with -I and -t against it.
	code, out, e := goRping(ctx, "-c", "-a", vm.IP, "-I", vm.IP, "-t", "32", "-p", "17220", "-C", "2", "-v", "-V")
	require.Equal(t, 0, code, "%s", e)
	pingLines(t, out.String(), "ping data: ", 2, 64)
	stop()
	select {
	case code := <-done:
		require.Equal(t, 0, code)
		require.Equal(t, 8, strings.Count(sout.String(), "server ping data: "))
	case <-time.After(20 * time.Second):
		t.Fatal("the persistent server did not stop with its context")
	}
	require.Empty(t, before.Diff(testutil.Take()), "fds or kernel objects left")
}
