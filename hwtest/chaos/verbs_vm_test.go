//go:build linux

package chaos_test

import (
	"errors"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// TestVerbsDestroyUnderLoad (issue 33): a connected pair of RC QPs in one
// process carries SENDs posted from several goroutines while others poll
// both CQs and repost receives; meanwhile one goroutine destroys the
// objects (QPs, CQs, MR, PD, in a different order each round). A call on
// a destroyed object must fail with uverbs.ErrClosed, and the kernel may
// refuse a destroy while another object uses it (EBUSY); nothing may panic,
// hang or leak (TestMain counts fds and the kernel's RDMA objects). `make
// chaos-vm` runs it with the race detector too (vm test -race).
func TestVerbsDestroyUnderLoad(t *testing.T) {
	vm := testutil.VM(t)
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	var stats struct{ posted, completed, closedErrs, busy atomic.Int64 }
	for round := 0; round < rounds; round++ {
		verbsRound(t, vm, round, &stats.posted, &stats.completed, &stats.closedErrs, &stats.busy)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d rounds: %d sends posted, %d completions, %d calls refused as closed, %d destroys refused as busy",
		rounds, stats.posted.Load(), stats.completed.Load(), stats.closedErrs.Load(), stats.busy.Load())
	require.Positive(t, stats.completed.Load(), "the QPs carried traffic before they went")
	require.Positive(t, stats.closedErrs.Load(), "calls raced the destroys")
}

const sendMark = 1 << 32

func verbsRound(t *testing.T, vm testutil.VMInfo, round int, posted, completed, closedErrs, busy *atomic.Int64) {
	ctx, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	defer ctx.Close()
	var ipGID uverbs.GID
	copy(ipGID[:], net.ParseIP(vm.IP).To16())
	gidIndex, err := ctx.GIDIndexForIP(1, ipGID)
	require.NoError(t, err)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	const depth, size = 64, 256
	mem, err := uverbs.AllocMemory(4*depth*size, uverbs.MemoryOptions{})
	require.NoError(t, err)
	defer mem.Close()
	mr, err := pd.RegMR(mem.Bytes(), uverbs.AccessLocalWrite)
	require.NoError(t, err)
	var cqs [2]*uverbs.CQ
	var qps [2]*uverbs.QP
	params := uverbs.ConnectParams{Port: 1, SGIDIndex: gidIndex, MTU: uverbs.MTU1024, Access: uverbs.AccessLocalWrite, HopLimit: 1}
	for i := range qps {
		cqs[i], err = ctx.CreateCQ(uverbs.CQInitAttr{CQE: 4 * depth})
		require.NoError(t, err)
		qps[i], err = pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cqs[i], RecvCQ: cqs[i],
			Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
		require.NoError(t, qps[i].Init(params))
	}
	for i := range qps {
		remote := uverbs.Endpoint{QPN: qps[1-i].QPN(), PSN: 100, GID: ipGID}
		require.NoError(t, qps[i].Connect(remote, 100, params))
	}
	refused := func(what string, err error) {
		switch {
		case err == nil:
		case errors.Is(err, uverbs.ErrClosed):
			closedErrs.Add(1)
		default:
			// a completion-queue or post error of a QP whose peer went
			// is the device's answer, not a failure of the API
			t.Logf("round %d: %s: %v", round, what, err)
		}
	}
	for i := 0; i < depth; i++ {
		for q := range qps {
			_, err := qps[q].PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{mr.SGE((q*depth+i)*size, size)}}})
			require.NoError(t, err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var inflight [2]atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			q := g % 2
			wr := []uverbs.SendWR{{WRID: sendMark | uint64(g), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{mr.SGE((2*depth+g)*size, size)}}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if inflight[q].Load() >= depth/4 {
					time.Sleep(20 * time.Microsecond)
					continue
				}
				inflight[q].Add(1)
				if _, err := qps[q].PostSend(wr); err != nil {
					inflight[q].Add(-1)
					refused("post send", err)
					if errors.Is(err, uverbs.ErrClosed) {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				posted.Add(1)
			}
		}(g)
	}
	for q := range cqs {
		wg.Add(1)
		go func(q int) {
			defer wg.Done()
			wc := make([]uverbs.WC, 16)
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := cqs[q].Poll(wc)
				if err != nil {
					refused("poll", err)
					if errors.Is(err, uverbs.ErrClosed) {
						return
					}
					continue
				}
				for _, w := range wc[:n] {
					completed.Add(1)
					if w.WRID&sendMark != 0 { // (an error completion's opcode means nothing)
						inflight[q].Add(-1)
						continue
					}
					if w.Status == uverbs.WCSuccess {
						slot := int(w.WRID)
						_, err := qps[q].PostRecv([]uverbs.RecvWR{{WRID: w.WRID, SGL: []uverbs.SGE{mr.SGE((q*depth+slot)*size, size)}}})
						refused("post recv", err)
					}
				}
				if n == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}(q)
	}
	// the destroyer: every object, in an order of this round's
	rng := rand.New(rand.NewSource(int64(round)))
	type obj struct {
		name  string
		close func() error
	}
	objs := []obj{
		{"qp 0", qps[0].Close}, {"qp 1", qps[1].Close},
		{"cq 0", cqs[0].Close}, {"cq 1", cqs[1].Close},
		{"mr", mr.Close}, {"pd", pd.Close},
	}
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	time.Sleep(time.Duration(5+rng.Intn(40)) * time.Millisecond)
	var left []obj
	for _, o := range objs {
		if err := o.close(); err != nil {
			if !errors.Is(err, syscall.EBUSY) {
				t.Errorf("round %d: destroying %s: %v (want EBUSY, in use by an object not yet destroyed, or success)", round, o.name, err)
			}
			busy.Add(1) // in use by an object not yet destroyed: the kernel's EBUSY
			left = append(left, o)
		}
		time.Sleep(time.Duration(rng.Intn(3)) * time.Millisecond)
	}
	// what was refused goes once its users have
	for pass := 0; len(left) > 0 && pass < 6; pass++ {
		var again []obj
		for _, o := range left {
			if err := o.close(); err != nil {
				again = append(again, o)
				if pass == 5 {
					t.Errorf("round %d: %s cannot be destroyed after everything using it went: %v", round, o.name, err)
				}
			}
		}
		left = again
	}
	done := make(chan struct{})
	go func() { close(stop); wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("round %d: posting and polling goroutines still running 30 s after every object went", round)
	}
}
