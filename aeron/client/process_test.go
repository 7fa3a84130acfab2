package client_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
)

// Multi-process tests re-execute the test binary in a role chosen by
// IBGO_AERON_ROLE: driver and clients run in separate processes, as in
// production.

const roleEnv = "IBGO_AERON_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Getenv("IBGO_AERON_DIR"), os.Getenv("IBGO_AERON_ARG")))
	}
	os.Exit(m.Run())
}

func runRole(role, dir, arg string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, role+": "+format+"\n", args...)
		return 2
	}
	switch role {
	case "driver":
		cfg := testConfig(nopTB{})
		cfg.Dir = dir
		d, err := driver.Start(cfg)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Println("ready")
		<-d.Terminated()
		return 0
	case "pub": // arg: "<publisher id> <messages>"
		f := strings.Fields(arg)
		id, _ := strconv.Atoi(f[0])
		n, _ := strconv.Atoi(f[1])
		c, err := client.Connect(context.Background(), client.Options{Dir: dir})
		if err != nil {
			return fail("%v", err)
		}
		defer c.Close()
		p, err := c.AddPublication(context.Background(), "aeron:ipc", 20)
		if err != nil {
			return fail("%v", err)
		}
		msg := make([]byte, 100)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(msg, uint32(id))
			binary.LittleEndian.PutUint64(msg[4:], uint64(i))
			for {
				r := p.Offer(msg)
				if r > 0 {
					break
				}
				if r != client.BackPressured && r != client.AdminAction && r != client.NotConnected {
					return fail("offer: %s", client.ResultString(r))
				}
			}
		}
		return 0
	case "hold": // add resources, report, then wait to be killed
		c, err := client.Connect(context.Background(), client.Options{Dir: dir})
		if err != nil {
			return fail("%v", err)
		}
		if _, err := c.AddPublication(context.Background(), "aeron:ipc", 30); err != nil {
			return fail("%v", err)
		}
		if _, err := c.AddSubscription(context.Background(), "aeron:ipc", 31); err != nil {
			return fail("%v", err)
		}
		ctr, err := c.AddCounter(context.Background(), 1001, []byte("k"), "held counter")
		if err != nil {
			return fail("%v", err)
		}
		fmt.Printf("ready %d %d\n", c.ClientID(), ctr.ID())
		select {}
	case "claim-and-die": // claim a frame on stream 40 and exit without committing
		c, err := client.Connect(context.Background(), client.Options{Dir: dir})
		if err != nil {
			return fail("%v", err)
		}
		p, err := c.AddPublication(context.Background(), "aeron:ipc", 40)
		if err != nil {
			return fail("%v", err)
		}
		var claim client.BufferClaim
		for {
			r := p.TryClaim(64, &claim)
			if r > 0 {
				break
			}
			if r == client.Closed || r == client.PublicationError {
				return fail("claim: %s", client.ResultString(r))
			}
		}
		fmt.Println("claimed")
		os.Exit(0) // no commit, no close
	}
	return fail("unknown role")
}

type nopTB struct{ testing.TB }

func (nopTB) TempDir() string { return os.TempDir() }

type child struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func spawn(t *testing.T, role, dir, arg string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, "IBGO_AERON_DIR="+dir, "IBGO_AERON_ARG="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return &child{cmd: cmd, out: bufio.NewScanner(out)}
}

func (c *child) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("child %v ended without output: %v", c.cmd.Args, c.out.Err())
	}
	return c.out.Text()
}

func (c *child) wait(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Wait(), "child %v", c.cmd.Env[len(c.cmd.Env)-3:])
}

func TestMultiProcessPublishers(t *testing.T) {
	dir := testConfig(t).Dir
	drv := spawn(t, "driver", dir, "")
	require.Equal(t, "ready", drv.line(t))
	c := connect(t, dir)
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 20)
	require.NoError(t, err)

	const pubs, n = 3, 3000
	var children []*child
	for i := 0; i < pubs; i++ {
		children = append(children, spawn(t, "pub", dir, fmt.Sprintf("%d %d", i, n)))
	}
	next := make([]uint64, pubs)
	total := 0
	handler := func(p []byte, h *client.Header) {
		id := binary.LittleEndian.Uint32(p)
		seq := binary.LittleEndian.Uint64(p[4:])
		require.Less(t, id, uint32(pubs))
		require.Equal(t, next[id], seq, "publisher %d out of order", id)
		next[id]++
		total++
	}
	waitFor(t, "all messages of all publishers", func() bool { sub.Poll(handler, 100); return total == pubs*n })
	for _, ch := range children {
		ch.wait(t)
	}
	// The driver is still serving: stop it with SIGTERM-less kill is fine here.
	require.NoError(t, drv.cmd.Process.Signal(syscall.SIGKILL))
}

func TestClientKilledResourcesReleased(t *testing.T) {
	cfg := testConfig(t)
	cfg.ClientLivenessTimeout = 500 * time.Millisecond
	d := startDriver(t, cfg)
	// The survivor's keepalives must come well within the short liveness
	// timeout (the default 500 ms interval equals it: under the race
	// detector the survivor itself was sometimes timed out).
	c := connect(t, d.Dir(), func(o *client.Options) { o.KeepaliveInterval = 50 * time.Millisecond })
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 30) // shares the killed client's publication
	require.NoError(t, err)

	h := spawn(t, "hold", d.Dir(), "")
	f := strings.Fields(h.line(t))
	require.Equal(t, "ready", f[0])
	heldID, _ := strconv.ParseInt(f[1], 10, 64)
	ctrID, _ := strconv.Atoi(f[2])
	counters := c.Counters()
	require.Equal(t, "held counter", counters.CounterLabel(int32(ctrID)))
	timeouts := counters.CounterValue(24)
	require.NoError(t, h.cmd.Process.Kill())
	h.cmd.Wait()

	waitFor(t, "client liveness timeout counted", func() bool { return counters.CounterValue(24) > timeouts })
	// The driver counts the timeout, then releases the client's resources:
	// wait for the release rather than racing it.
	waitFor(t, "the dead client's counter freed", func() bool {
		return counters.CounterState(int32(ctrID)) != int32(cnc.RecordAllocated)
	})
	require.Equal(t, int32(cnc.NullCounterID), counters.FindByTypeIDAndRegistrationID(cnc.TypeClientHeartbeatTimestamp, heldID))
	counters.ForEach(func(ctr cnc.Counter) bool {
		require.NotEqual(t, heldID, ctr.OwnerID, "counter %d %q still owned by the dead client", ctr.ID, ctr.Label)
		return true
	})
	// The survivor's publication (shared with the dead client) still works.
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 30)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
	offer(t, pub, []byte("still here"))
	got := ""
	waitFor(t, "message", func() bool {
		sub.Poll(func(p []byte, _ *client.Header) { got = string(p) }, 10)
		return got != ""
	})
	require.Equal(t, "still here", got)
	require.NoError(t, c.Err())
}

func TestDriverKilledClientsSeeTimeout(t *testing.T) {
	dir := testConfig(t).Dir
	drv := spawn(t, "driver", dir, "")
	require.Equal(t, "ready", drv.line(t))
	errs := make(chan error, 4)
	c := connect(t, dir, func(o *client.Options) {
		o.DriverTimeout = time.Second
		o.OnError = func(err error) { errs <- err }
	})
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 1)
	require.NoError(t, err)
	require.NoError(t, drv.cmd.Process.Kill())
	drv.cmd.Wait()
	select {
	case err := <-errs:
		require.ErrorIs(t, err, client.ErrDriverTimeout)
	case <-time.After(deadline):
		t.Fatal("no driver timeout reported")
	}
	require.ErrorIs(t, c.Err(), client.ErrDriverTimeout)
	require.Equal(t, client.Closed, pub.Offer([]byte("x")))
	_, err = c.AddSubscription(context.Background(), "aeron:ipc", 1)
	require.ErrorIs(t, err, client.ErrDriverTimeout)

	// A new client refuses the dead driver's directory.
	_, err = client.Connect(context.Background(), client.Options{Dir: dir, DriverTimeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, client.ErrDriverTimeout)
}

func TestPublisherKilledMidClaimIsUnblocked(t *testing.T) {
	cfg := testConfig(t)
	cfg.PublicationUnblockTimeout = 300 * time.Millisecond
	d := startDriver(t, cfg)
	c := connect(t, d.Dir())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 40)
	require.NoError(t, err)
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 40)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })

	unblocked := c.CounterValue(19)
	ch := spawn(t, "claim-and-die", d.Dir(), "")
	require.Equal(t, "claimed", ch.line(t))
	ch.wait(t)
	const n = 50
	for i := 0; i < n; i++ {
		offer(t, pub, []byte(fmt.Sprintf("after %d", i)))
	}
	var got []string
	waitFor(t, "messages behind the abandoned claim", func() bool {
		sub.Poll(func(p []byte, _ *client.Header) { got = append(got, string(p)) }, 10)
		return len(got) == n
	})
	for i, s := range got {
		require.Equal(t, fmt.Sprintf("after %d", i), s)
	}
	require.Greater(t, c.CounterValue(19), unblocked, "Unblocked Publications counted")
}
