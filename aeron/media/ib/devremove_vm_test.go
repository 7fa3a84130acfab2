//go:build linux

package ib_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestIBDeviceRemoval (issue 29): the rxe device is deleted (`rdma link
// delete`) in the middle of an aeron:ib stream between two drivers in one
// guest and added again a second later, UD and RC. Soft-RoCE cannot
// revoke a process's user contexts, so the delete waits in the kernel
// until every object on the device is closed: it returns at once only
// because both media let go of everything when CM told their ids
// DEVICE_REMOVAL. They then open again on the new device, and every
// message arrives once and in order, as across a short link outage; the
// removal is counted and in both error logs; a publication added
// afterwards connects.
func TestIBDeviceRemoval(t *testing.T) {
	vm := testutil.OneNode(t)
	for i, qp := range []string{"ud", "rc"} {
		t.Run(qp, func(t *testing.T) {
			ch := fmt.Sprintf("aeron:ib?endpoint=%s:%d|mtu=1024|ib-qp=%s", vm.IP, 24651+i, qp)
			const n = 30_000
			s := startStream(t, ch, n, 6*deadline)
			dp, mp, ds, ms, pub, done := s.dp, s.mp, s.ds, s.ms, s.pub, s.done
			ctx := context.Background()
			offerAll(t, pub, 0, n/3, deadline)
			rdma := func(args ...string) {
				start := time.Now()
				out, err := exec.Command("timeout", append([]string{"30", "rdma", "link"}, args...)...).CombinedOutput()
				took := time.Since(start)
				t.Logf("rdma link %s: %v after %v %s", strings.Join(args, " "), err, took.Round(time.Millisecond), out)
				require.NoError(t, err, "rdma link %s: %s", strings.Join(args, " "), out)
				require.Less(t, took, 10*time.Second, "rdma link %s waited for the drivers to let go", args[0])
			}
			t.Cleanup(func() {
				// whatever happened, the guest keeps its device for the tests after this one
				if _, err := exec.Command("rdma", "link", "show", vm.Dev+"/1").CombinedOutput(); err != nil {
					_ = exec.Command("rdma", "link", "add", vm.Dev, "type", "rxe", "netdev", vm.Netdev).Run()
				}
				s.logEnd(t, qp)
			})
			rdma("delete", vm.Dev)
			time.Sleep(time.Second)
			rdma("add", vm.Dev, "type", "rxe", "netdev", vm.Netdev)
			offerAll(t, pub, n/3, n, 2*deadline)
			require.NoError(t, <-done, "%s: every message once and in order across the removal", qp)
			require.Positive(t, mp.DeviceRemovals.Load(), "the publisher's medium counted the removal")
			require.Positive(t, ms.DeviceRemovals.Load(), "the subscriber's medium counted the removal")
			lp, _ := errorLog(t, dp)
			ls, _ := errorLog(t, ds)
			require.Contains(t, lp, "DEVICE_REMOVAL", "the publisher's error log")
			require.Contains(t, ls, "DEVICE_REMOVAL", "the subscriber's error log")

			// a publication added after the removal connects
			p2, err := connectTo(t, dp).AddPublication(ctx, ch, 1002)
			require.NoError(t, err)
			s2, err := connectTo(t, ds).AddSubscription(ctx, ch, 1002)
			require.NoError(t, err)
			waitUntil(t, "a new publication connects after the removal", deadline, func() bool { return p2.IsConnected() && s2.IsConnected() })
		})
	}
}
