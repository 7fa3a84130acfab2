package ib

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// A completion queue that fails (its poll returns an error: the provider
// puts a CQ in error after an overrun, or the device failed) fails every
// later poll: nothing the endpoint sends or receives completes any more,
// and the CQ cannot be repaired, only replaced. A QP's CQs are fixed when
// it is created, so the QP goes too. The transport counts the failure
// (Media.CQErrors, RCStats.CQErrors), writes it once to the driver's error
// log with the cause, and rebuilds on the agent's next Recv what its setup
// made, through the same functions:
//
//   - a unicast subscription (kindListen) listens again on its endpoint:
//     a new QP, CQ and receive ring, answering SIDR with the new QPN. Its
//     publications keep sending to the old QPN until they notice the
//     silence (ReresolveAfter) and resolve it again (resolve.go); the
//     peers learnt from received datagrams are learnt again.
//   - a unicast publication (kindDial) resolves its subscription again at
//     once, in the background, as after a silence (reresolve).
//   - a multicast transport (kindGroup) opens a new endpoint on its
//     interface and joins its groups again.
//
// The publication logs registered with the old endpoint are deregistered
// first and registered again with the new one at the next Send (regmem.go:
// the old lkeys belong to the old PD), and the old QP's posted sends no
// longer hold any of their bytes in flight. Datagrams lost meanwhile are
// Aeron's to recover (NAKs and retransmits), as a UDP socket's drops are.
// A rebuild that fails is reported and tried again after a wait that
// grows from ResolveRetry to DialBackoffMax (backoff.go). A removed device
// takes the same way (devremove.go).
//
// ib-qp=rc's shared CQ and SRQ are rebuilt in rc.go (rebuildShared).

// errInjected is the failure FailNextPoll injects (export_test.go).
var errInjected = errors.New("injected CQ failure (test hook)")

// errCQFailed is what polling returns between the failure and the rebuild.
var errCQFailed = errors.New("ib: the CQ failed; the endpoint is being rebuilt")

// cqFailure notes that the CQ failed: counted and reported once, rebuilt
// by the next Recv.
func (t *transport) cqFailure(err error) {
	if t.cqFailed {
		return
	}
	t.cqFailed = true
	t.m.CQErrors.Add(1)
	what := "it resolves its subscription again with a new QP and CQ"
	switch t.kind {
	case kindListen:
		what = "it listens again with a new QP and CQ"
	case kindGroup:
		what = "it joins its groups again with a new QP and CQ"
	}
	t.m.report(fmt.Errorf("ib: the CQ of UD endpoint %s failed (poll: %w); %s", t.describe(), err, what))
}

// describe names the endpoint for the error log: its bound address, or
// what it was opened for when it has none.
func (t *transport) describe() string {
	switch t.kind {
	case kindListen:
		return t.bind.String()
	case kindGroup:
		return t.group.bind.String() + " on " + t.group.local.String()
	}
	return "to " + t.connect.String()
}

// rebuild replaces the failed endpoint (see above). Called by Recv, on the
// transport's agent.
func (t *transport) rebuild() error {
	now := time.Now().UnixNano()
	if now < t.rebuildAt {
		return nil
	}
	if t.kind == kindDial {
		// the dial goroutine retries by itself from here on
		t.cqFailed = false
		t.m.CQRebuilds.Add(1)
		t.reresolve()
		return nil
	}
	t.stopLoop()
	if err := t.dropRegistrations(); err != nil {
		t.m.report(fmt.Errorf("ib: rebuild UD endpoint %s: deregister publication logs: %w", t.describe(), err))
	}
	_ = t.release()
	t.broken = false
	var err error
	if t.kind == kindListen {
		err = t.listen()
	} else {
		err = t.joinGroups(context.Background())
	}
	if err != nil {
		_ = t.release()
		t.rebuilds.failed()
		t.rebuildAt = now + t.rebuilds.wait().Nanoseconds()
		err = fmt.Errorf("ib: rebuild UD endpoint %s: %w", t.describe(), err)
		t.m.report(err)
		return err
	}
	t.rebuilds.reset()
	t.cqFailed, t.rebuildAt = false, 0
	t.m.CQRebuilds.Add(1)
	return nil
}

// ---- ib-qp=rc: the shared CQ and SRQ of a subscription

// rcShared is one generation of a subscription's shared queues and the
// receive ring posted to the SRQ.
type rcShared struct {
	cq  *uverbs.CQ
	srq *uverbs.SRQ
	mem *uverbs.Memory
	mr  *uverbs.MR
}

// close destroys q in the order the device needs: the SRQ and the CQ (the
// kernel refuses while a QP still uses them: ErrBusy, and q keeps what is
// left), then the ring, which nothing can DMA into any more.
func (q *rcShared) close() error {
	if q.srq != nil {
		if err := q.srq.Close(); err != nil {
			return err
		}
		q.srq = nil
	}
	if q.cq != nil {
		if err := q.cq.Close(); err != nil {
			return err
		}
		q.cq = nil
	}
	var errs []error
	if q.mr != nil {
		errs = append(errs, q.mr.Close())
		q.mr = nil
	}
	if q.mem != nil {
		errs = append(errs, q.mem.Close())
		q.mem = nil
	}
	return errors.Join(errs...)
}

// retire moves the current shared queues to t.retired.
func (t *rcTransport) retire() {
	if t.cq == nil && t.srq == nil && t.mem == nil {
		return
	}
	// their events mean nothing any more (asyncev.go)
	t.m.unwatchCQ(t.vctx, t.cq)
	t.m.unwatchSRQ(t.vctx, t.srq)
	t.retired = append(t.retired, rcShared{cq: t.cq, srq: t.srq, mem: t.mem, mr: t.mr})
	t.cq, t.srq, t.mem, t.mr = nil, nil, nil, nil
}

// sharedFailure notes that the subscription's shared CQ or SRQ failed:
// counted and reported once, rebuilt by the next Recv.
func (t *rcTransport) sharedFailure(op string, err error) {
	if t.sharedFailed {
		return
	}
	t.sharedFailed = true
	t.m.RC.CQErrors.Add(1)
	t.m.report(fmt.Errorf("ib: rc %s of %s failed: %w; its connections are dropped and its shared CQ and receive queue rebuilt (its publications dial again)", op, t.local, err))
}

// rebuildShared replaces a subscription's failed shared queues: every
// connection goes (their QPs are on the old queues, and a QP's CQ and SRQ
// are fixed at creation; their publications see the disconnect and dial
// again), the pending completions with it, and a new CQ, SRQ and posted
// ring take the old ones' place under a new generation. The accept
// goroutine creates QPs only under sharedMu, on the current generation; a
// connection it made on the old one is dropped when handed over. The old
// queues are destroyed once no QP uses them (else at Close).
func (t *rcTransport) rebuildShared() error { return t.rebuildSharedFor(true) }

// rebuildSharedFor is rebuildShared; failure says the old queues failed
// (counted in CQRebuilds), else they are replaced for larger buffers (grow).
func (t *rcTransport) rebuildSharedFor(failure bool) error {
	now := time.Now().UnixNano()
	if now < t.rebuildAt {
		return nil
	}
	t.sharedMu.Lock()
	defer t.sharedMu.Unlock()
	t.drain()
	for _, c := range t.byKey {
		t.m.RC.Lost.Add(1)
		t.drop(c)
	}
	t.pend, t.pendAt = t.pend[:0], 0
	t.retire()
	t.gen++
	err := func() error {
		vctx, _, err := t.lid.Verbs()
		if err != nil {
			return err
		}
		return t.makeShared(vctx)
	}()
	t.freeRetired()
	if err != nil {
		t.retire() // what was made: none of it is posted to usefully
		t.freeRetired()
		t.rebuildAt = now + ResolveRetry.Nanoseconds()
		err = fmt.Errorf("ib: rc rebuild the shared queues of %s: %w", t.local, err)
		t.m.report(err)
		return err
	}
	t.sharedFailed, t.rebuildAt = false, 0
	if failure {
		t.m.CQRebuilds.Add(1)
	}
	return nil
}

// freeRetired destroys the retired queues no QP uses any more.
func (t *rcTransport) freeRetired() {
	kept := t.retired[:0]
	for _, q := range t.retired {
		if q.close() != nil {
			kept = append(kept, q)
		}
	}
	t.retired = kept
}
