// Package testutil gates tests by tier and checks for leaks.
//
// VM-tier tests call VM(t): on a machine without an RDMA device the test is
// skipped with the reason, unless REQUIRE_VM=1 is set (as in CI and inside
// the harness), in which case it fails. Packages with VM-tier tests run them
// through Main, which fails the binary (exit 99) when file descriptors or
// kernel RDMA objects (pd, cq, qp, mr, srq, ctx, cm_id per device, read
// through RDMA netlink) are left over.
package testutil

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ibgo/ibgo/internal/nl"
)

// VMInfo describes the test bed the harness set up (hwtest/vm).
type VMInfo struct {
	Dev    string // RDMA device, e.g. rxe0
	Netdev string // its netdev, e.g. dummy0 or eth0
	IP     string // this node's IPv4 address on Netdev
	Peer   string // the other node's address (two-guest topology), else ""
	Topo   string // "one" or "two"
	Node   int    // 1 or 2
	MTU    int    // netdev MTU
}

// Required reports whether a missing VM tier is a failure (REQUIRE_VM=1).
func Required() bool { return os.Getenv("REQUIRE_VM") == "1" }

// InGuest reports whether the test runs inside the VM harness's guest (its
// init exports IBGO_VM=1).
func InGuest() bool { return os.Getenv("IBGO_VM") == "1" }

// HostOnly skips a unit-tier test inside the guest: the harness runs a
// package's whole test binary there for its VM-tier tests, but the guest has
// no Go toolchain and no source tree beyond testdata/, so a test that builds
// binaries or reads the repository belongs to the host run.
func HostOnly(t testing.TB, why string) {
	t.Helper()
	if InGuest() {
		t.Skipf("unit tier, run on the host: %s", why)
	}
}

// skipOrFail skips with reason, or fails when the tier is required.
func skipOrFail(t testing.TB, reason string) {
	t.Helper()
	if Required() {
		t.Fatalf("REQUIRE_VM=1 but %s", reason)
	}
	t.Skipf("VM tier: %s (run it with `make test-vm` or `go run ./hwtest/vm test`)", reason)
}

// VM returns the test bed, skipping (or failing under REQUIRE_VM=1) when no
// RDMA device exists.
func VM(t testing.TB) VMInfo {
	t.Helper()
	info := VMInfo{
		Dev:    os.Getenv("IBGO_VM_DEV"),
		Netdev: os.Getenv("IBGO_VM_NETDEV"),
		IP:     os.Getenv("IBGO_VM_IP"),
		Peer:   os.Getenv("IBGO_VM_PEER"),
		Topo:   os.Getenv("IBGO_VM_TOPO"),
	}
	info.Node, _ = strconv.Atoi(os.Getenv("IBGO_VM_NODE"))
	info.MTU, _ = strconv.Atoi(os.Getenv("IBGO_VM_MTU"))
	if info.Dev == "" {
		ents, _ := os.ReadDir("/sys/class/infiniband")
		if len(ents) == 0 {
			skipOrFail(t, "no RDMA device (/sys/class/infiniband is empty)")
		}
		info.Dev = ents[0].Name()
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", info.Dev)); err != nil {
		skipOrFail(t, fmt.Sprintf("RDMA device %s does not exist", info.Dev))
	}
	if info.Topo == "" {
		info.Topo = "one"
	}
	if info.Node == 0 {
		info.Node = 1
	}
	return info
}

// TwoNodes skips unless the test runs in the two-guest topology. (That
// topology is a separate harness run; a skip here is expected in the
// one-guest run and is not turned into a failure.)
func TwoNodes(t testing.TB) VMInfo {
	t.Helper()
	v := VM(t)
	if v.Topo != "two" || v.Peer == "" {
		t.Skip("needs the two-guest topology (go run ./hwtest/vm test -topo two)")
	}
	return v
}

// OneNode skips in the two-guest topology (tests that assume loopback).
func OneNode(t testing.TB) VMInfo {
	t.Helper()
	v := VM(t)
	if v.Topo == "two" {
		t.Skip("loopback test; runs in the one-guest topology")
	}
	return v
}

// Snapshot is a point-in-time view of leakable resources.
type Snapshot struct {
	FDs map[int]string               // fd -> link target
	Res map[string]map[string]uint64 // device -> resource -> count
}

// Take records open fds and, where RDMA netlink works, the kernel's
// resource counts per device.
func Take() Snapshot {
	s := Snapshot{FDs: map[int]string{}, Res: map[string]map[string]uint64{}}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory fd of ReadDir itself
		}
		s.FDs[n] = t
	}
	c, err := nl.Dial()
	if err != nil {
		return s
	}
	defer c.Close()
	devs, err := c.Devices()
	if err != nil {
		return s
	}
	for _, d := range devs {
		if r, err := c.ResSummary(d.Index); err == nil {
			s.Res[d.Name] = r
		}
	}
	return s
}

// Diff lists what after has beyond s.
func (s Snapshot) Diff(after Snapshot) []string {
	var out []string
	for fd, t := range after.FDs {
		if s.FDs[fd] != t {
			out = append(out, fmt.Sprintf("fd %d -> %s", fd, t))
		}
	}
	for dev, r := range after.Res {
		for k, v := range r {
			if b := s.Res[dev][k]; v > b {
				out = append(out, fmt.Sprintf("%s: %d %s objects (was %d)", dev, v, k, b))
			}
		}
	}
	sort.Strings(out)
	return out
}

// Main runs the tests and exits 99 when fds or kernel RDMA objects leaked.
func Main(m *testing.M) {
	warmPoller()
	before := Take()
	code := m.Run()
	// Give finalizers and the kernel's deferred cleanups a moment.
	var leaks []string
	for i := 0; i < 20; i++ {
		leaks = before.Diff(Take())
		if len(leaks) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "LEAK: resources left after the tests:\n  %s\n", strings.Join(leaks, "\n  "))
		if code == 0 {
			code = 99
		}
	}
	os.Exit(code)
}

// warmPoller makes the runtime create its epoll fd and wakeup pipe before the
// baseline, so they do not look like leaks.
func warmPoller() {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	r.SetReadDeadline(time.Now())
	var b [1]byte
	r.Read(b[:])
	r.Close()
	w.Close()
}

// Stdout runs f with the process's standard output captured and returns
// what f printed: the VM tier runs the examples that need a device (they
// carry no Output comment, so the unit tier only compiles them) and checks
// their output with it. Not safe to use from parallel tests.
func Stdout(t testing.TB, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stdout = old; w.Close() }()
		f()
	}()
	s := <-done
	r.Close()
	return s
}
