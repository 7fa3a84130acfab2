package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
)

// TestDriverTerminationToken: `ibgo driver --termination-token` ignores a
// request with another token and exits cleanly on the right one.
func TestDriverTerminationToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "aeron")
	done := make(chan int, 1)
	go func() {
		code, _, _ := runIbgo(t, "driver", "--dir", dir, "--ipc-term-length", "64k", "--termination-token", "open sesame")
		done <- code
	}()
	require.Eventually(t, func() bool {
		active, _, err := driver.IsDriverActive(dir, 10*time.Second)
		return err == nil && active
	}, 30*time.Second, 5*time.Millisecond)
	f, err := cnc.OpenFile(cnc.Path(dir), false)
	require.NoError(t, err)
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)
	require.NoError(t, client.RequestDriverTermination(dir, []byte("open sesame!")))
	require.Eventually(t, func() bool { return rb.ConsumerPosition() == rb.ProducerPosition() }, 30*time.Second, time.Millisecond)
	select {
	case <-done:
		t.Fatal("the driver terminated on a wrong token")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, client.RequestDriverTermination(dir, []byte("open sesame")))
	select {
	case code := <-done:
		require.Equal(t, 0, code)
	case <-time.After(30 * time.Second):
		t.Fatal("the driver did not terminate on its token")
	}
}

// TestDriverBannerListsMedia (issue 28): the banner and the usage text
// name the media the driver was started with, not a fixed list.
func TestDriverBannerListsMedia(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "aeron")
	type result struct {
		code   int
		stdout string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, _ := runIbgo(t, "driver", "--dir", dir, "--ipc-term-length", "64k", "--termination-token", "t")
		done <- result{code, stdout}
	}()
	require.Eventually(t, func() bool {
		active, _, err := driver.IsDriverActive(dir, 10*time.Second)
		return err == nil && active
	}, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, client.RequestDriverTermination(dir, []byte("t")))
	r := <-done
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, " media=ipc,ib,udp\n")
	_, help, _ := runIbgo(t, "driver", "--help")
	require.Contains(t, help, "media: aeron:ipc, aeron:udp, aeron:ib")
}

// TestDriverRefusesInvoker: `ibgo driver` has no program to invoke an
// INVOKER driver, so it refuses the mode (flag or environment) and says why.
func TestDriverRefusesInvoker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "aeron")
	code, _, stderr := runIbgo(t, "driver", "--dir", dir, "--threading-mode", "invoker")
	require.NotZero(t, code)
	require.Contains(t, stderr, "AERON_THREADING_MODE=INVOKER")
	require.Contains(t, stderr, "use DEDICATED, SHARED_NETWORK or SHARED")
	t.Setenv("AERON_THREADING_MODE", "INVOKER")
	code, _, stderr = runIbgo(t, "driver", "--dir", dir)
	require.NotZero(t, code)
	require.Contains(t, stderr, "AERON_THREADING_MODE=INVOKER")
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "nothing was created")
}
