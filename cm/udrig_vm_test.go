//go:build linux

package cm_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	_ "github.com/ibgo/ibgo/rxe"
	"github.com/ibgo/ibgo/uverbs"
)

// udRig is the verbs side of a UD test: a PD, one registered region cut
// into receive slots of size+GRH bytes plus one send slot, and a CQ shared
// by send and receive. The QP comes from the cm package (created on an id).
type udRig struct {
	t     testing.TB
	ctx   *uverbs.Context
	pd    *uverbs.PD
	mem   *uverbs.Memory
	mr    *uverbs.MR
	cq    *uverbs.CQ
	qp    *uverbs.QP
	slots int
	size  int // payload bytes per message
}

const sendSlotWRID = 1 << 32

func newUDRig(t testing.TB, vctx *uverbs.Context, slots, size int) *udRig {
	r := &udRig{t: t, ctx: vctx, slots: slots, size: size}
	var err error
	r.pd, err = vctx.AllocPD()
	require.NoError(t, err)
	t.Cleanup(func() { r.pd.Close() })
	r.mem, err = uverbs.AllocMemory((slots+1)*(size+uverbs.GRHLen), uverbs.MemoryOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { r.mem.Close() })
	r.mr, err = r.pd.RegMR(r.mem.Bytes(), uverbs.AccessLocalWrite)
	require.NoError(t, err)
	t.Cleanup(func() { r.mr.Close() })
	r.cq, err = vctx.CreateCQ(uverbs.CQInitAttr{CQE: 2*slots + 2})
	require.NoError(t, err)
	t.Cleanup(func() { r.cq.Close() })
	return r
}

func (r *udRig) initAttr() uverbs.QPInitAttr {
	return uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: r.cq, RecvCQ: r.cq,
		Cap: uverbs.QPCap{MaxSendWR: uint32(r.slots) + 1, MaxRecvWR: uint32(r.slots), MaxSendSGE: 1, MaxRecvSGE: 1}}
}

func (r *udRig) slot(i int) []byte {
	n := r.size + uverbs.GRHLen
	return r.mem.Bytes()[i*n : (i+1)*n]
}

func (r *udRig) postRecvs() {
	for i := 0; i < r.slots; i++ {
		r.postRecv(i)
	}
}

func (r *udRig) postRecv(i int) {
	n := r.size + uverbs.GRHLen
	_, err := r.qp.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{r.mr.SGE(i*n, n)}}})
	require.NoError(r.t, err)
}

// send posts one SEND (with the immediate if imm != nil) of payload from the
// send slot; signaled sends complete on the CQ with WRID sendSlotWRID+seq.
func (r *udRig) send(ah *uverbs.AH, qpn, qkey uint32, payload []byte, imm *uint32, signaled bool, seq int) {
	n := r.size + uverbs.GRHLen
	off := r.slots * n
	copy(r.mem.Bytes()[off:], payload)
	wr := uverbs.SendWR{WRID: sendSlotWRID + uint64(seq), Opcode: uverbs.WRSend, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey,
		SGL: []uverbs.SGE{r.mr.SGE(off, len(payload))}}
	if imm != nil {
		wr.Opcode, wr.Imm = uverbs.WRSendWithImm, *imm
	}
	if signaled {
		wr.Flags = uverbs.SendSignaled
	}
	_, err := r.qp.PostSend([]uverbs.SendWR{wr})
	require.NoError(r.t, err)
}

// poll collects completions until want receives (and wantSends signaled
// sends) arrived or ctx ends; each successful receive goes to onRecv with
// its slot, and the slot is reposted afterwards.
func (r *udRig) poll(ctx context.Context, wantRecv, wantSend int, onRecv func(wc uverbs.WC, buf []byte)) error {
	wc := make([]uverbs.WC, 16)
	recv, sent := 0, 0
	for recv < wantRecv || sent < wantSend {
		n, err := r.cq.Poll(wc)
		if err != nil {
			return err
		}
		if n == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%w after %d/%d receives, %d/%d sends", err, recv, wantRecv, sent, wantSend)
			}
			time.Sleep(200 * time.Microsecond)
			continue
		}
		for _, w := range wc[:n] {
			if w.Status != uverbs.WCSuccess {
				return fmt.Errorf("completion of wr %#x: %s", w.WRID, w.Status)
			}
			if w.WRID >= sendSlotWRID {
				sent++
				continue
			}
			recv++
			if onRecv != nil {
				onRecv(w, r.slot(int(w.WRID))[:w.ByteLen])
			}
			r.postRecv(int(w.WRID))
		}
	}
	return nil
}

// pattern is message i of a test: a recognisable, index-dependent payload.
func pattern(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*7 + j)
	}
	copy(b, fmt.Sprintf("ibgo-ud-%04d:", i))
	return b
}

// cproc is a C peer from rdmacm-utils running beside the test, its output
// collected. (Its stdout is a pipe, so the C stdio buffers it until exit:
// progress lines cannot serve as readiness signals.)
type cproc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

// startC runs name with args (killed when ctx ends or the test finishes).
func startC(t testing.TB, ctx context.Context, name string, args ...string) *cproc {
	path, err := exec.LookPath(name)
	if err != nil {
		if testutil.Required() {
			t.Fatalf("REQUIRE_VM=1 but %s is not installed", name)
		}
		t.Skipf("%s not installed", name)
	}
	p := &cproc{name: name, cmd: exec.CommandContext(ctx, path, args...), done: make(chan error, 1)}
	pr, pw := io.Pipe()
	scanned := make(chan struct{})
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		close(scanned)
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		<-scanned
		p.done <- err
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
		}
		t.Logf("%s %s:\n%s", name, strings.Join(args, " "), p.output())
	})
	return p
}

func (p *cproc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait waits for the program to exit and returns its output.
func (p *cproc) wait(ctx context.Context) (string, error) {
	select {
	case err := <-p.done:
		return p.output(), err
	case <-ctx.Done():
		return p.output(), ctx.Err()
	}
}
