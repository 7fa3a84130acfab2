package ib

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// TestAsyncEventDispatch: a CQ_ERR or SRQ_ERR about a watched queue fails
// that queue's owner (no log line: the owner reports the failure with its
// endpoint); one about a queue nobody watches, and the error events, go
// to the error log; informational events do neither.
func TestAsyncEventDispatch(t *testing.T) {
	m := New()
	var got []string
	m.SetErrorHandler(func(err error) { got = append(got, err.Error()) })
	cq, other, srq := &uverbs.CQ{}, &uverbs.CQ{}, &uverbs.SRQ{}
	var cqFailed, srqFailed atomic.Bool
	m.async.queues = map[any]*atomic.Bool{cq: &cqFailed, srq: &srqFailed}

	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventCQErr, CQ: cq})
	require.True(t, cqFailed.Load())
	require.False(t, srqFailed.Load())
	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventSRQErr, SRQ: srq})
	require.True(t, srqFailed.Load())
	require.Empty(t, got)

	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventPortActive, Port: 1})
	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventCommEst})
	require.Empty(t, got)

	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventCQErr, CQ: other})
	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventQPFatal})
	m.onEvent("rxe0", uverbs.AsyncEvent{Type: uverbs.EventPortErr, Port: 1})
	require.Equal(t, []string{
		`ib: device rxe0 reported "CQ error" (asynchronous event 0)`,
		`ib: device rxe0 reported "local work queue catastrophic error" (asynchronous event 1)`,
		`ib: device rxe0 reported "port error" (asynchronous event 10)`,
	}, got)
}

// TestCQEventFailsPoll: a transport whose CQ the device reported in error
// fails its next poll with that cause and rebuilds, as after a failed poll.
func TestCQEventFailsPoll(t *testing.T) {
	m := New()
	var got []string
	m.SetErrorHandler(func(err error) { got = append(got, err.Error()) })
	tr := &transport{m: m, kind: kindListen}
	tr.cqEvent.Store(true)
	require.ErrorIs(t, tr.reap(), errCQEvent)
	require.True(t, tr.cqFailed)
	require.EqualValues(t, 1, m.CQErrors.Load())
	require.Len(t, got, 1)
	require.Contains(t, got[0], "asynchronous event CQ_ERR")
}
