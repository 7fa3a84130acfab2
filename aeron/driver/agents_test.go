package driver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// TestAgentsRunApartByThreadingMode holds the conductor inside a command
// and watches the sender and the receiver: in DEDICATED and SHARED_NETWORK
// mode they run on their own goroutine and keep working (the publication
// keeps sending SETUPs, the receiver keeps eliciting one from an unknown
// session); in SHARED mode one goroutine runs all three, so both stop
// until the conductor returns.
func TestAgentsRunApartByThreadingMode(t *testing.T) {
	for _, mode := range []ThreadingMode{Dedicated, SharedNetwork, Shared} {
		t.Run(string(mode), func(t *testing.T) {
			m, cl, hold, entered := heldConductorDriver(t, mode)
			ctx := context.Background()
			_, err := cl.AddPublication(ctx, "aeron:udp?endpoint=127.0.0.1:40456", 7)
			require.NoError(t, err)
			_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:40457", 7)
			require.NoError(t, err)
			var pubT *fakeTransport
			require.Eventually(t, func() bool {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, tr := range m.transports {
					if tr.bind.Port() == 0 {
						pubT = tr
					}
				}
				return pubT != nil
			}, 10*time.Second, time.Millisecond)
			subT := m.transport(netip.MustParseAddrPort("127.0.0.1:40457"))
			require.NotNil(t, subT)
			count := func(tr *fakeTransport, typ protocol.FrameType, flags uint8) int {
				n := 0
				for _, s := range tr.sent() {
					var fh protocol.FrameHeader
					if fh.Decode(s.b) == nil && fh.Type == typ && fh.Flags == flags {
						n++
					}
				}
				return n
			}

			done := make(chan error, 1)
			go func() {
				_, err := cl.AddCounter(ctx, 1001, nil, "held")
				done <- err
			}()
			<-entered // the conductor is now inside the command
			setups := count(pubT, protocol.TypeSetup, 0)
			var hb protocol.DataHeader
			hb.Type, hb.Flags, hb.SessionID, hb.StreamID = protocol.TypeData, protocol.FlagsUnfragmented, 99, 7
			b := make([]byte, protocol.DataHeaderLength)
			_, err = hb.Encode(b)
			require.NoError(t, err)
			subT.push(netip.MustParseAddrPort("127.0.0.1:40999"), b)
			time.Sleep(450 * time.Millisecond)
			moreSetups := count(pubT, protocol.TypeSetup, 0) - setups
			elicited := count(subT, protocol.TypeStatusMessage, protocol.SMFlagSetup)
			close(hold)
			require.NoError(t, <-done)
			if mode == Shared {
				require.Zero(t, moreSetups, "SHARED: the sender runs on the conductor's goroutine")
				require.Zero(t, elicited, "SHARED: the receiver runs on the conductor's goroutine")
				require.Eventually(t, func() bool { return count(subT, protocol.TypeStatusMessage, protocol.SMFlagSetup) > 0 },
					10*time.Second, time.Millisecond, "the receiver resumes with the conductor")
			} else {
				require.GreaterOrEqual(t, moreSetups, 2, "%s: the sender sends SETUPs every 100 ms on its own", mode)
				require.Positive(t, elicited, "%s: the receiver elicits a SETUP on its own", mode)
			}
		})
	}
}

// heldConductorDriver starts a driver on a fakeMedia in mode whose
// conductor, inside an ADD_COUNTER command, signals entered and waits
// until hold is closed, and a client of it.
func heldConductorDriver(t *testing.T, mode ThreadingMode) (m *fakeMedia, cl *client.Client, hold, entered chan struct{}) {
	m = &fakeMedia{}
	cfg := udpTestConfig(t)
	cfg.ThreadingMode = mode
	cfg.SenderIdle, cfg.ReceiverIdle, cfg.SharedNetworkIdle, cfg.SharedIdle = "sleep-ns,50000", "sleep-ns,50000", "sleep-ns,50000", "sleep-ns,50000"
	hold, entered = make(chan struct{}), make(chan struct{}, 1)
	d, err := Start(cfg, WithMedia(m), WithCommandObserver(func(typeID int32, _ []byte) {
		if typeID == cnc.CmdAddCounter {
			entered <- struct{}{}
			<-hold
		}
	}))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	cl, err = client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return m, cl, hold, entered
}

// TestReceiverNeverWaitsOnFullConductorQueue: while the conductor is held
// inside a command, SETUPs of more new sessions than its queue holds
// arrive. The receiver must not wait for room (the conductor may itself be
// waiting on the receiver's queue): it reads every datagram, counts the
// offers that failed, and the sessions it could not hand over get their
// image from a later SETUP once the conductor is back.
func TestReceiverNeverWaitsOnFullConductorQueue(t *testing.T) {
	m, cl, hold, entered := heldConductorDriver(t, Dedicated)
	ctx := context.Background()
	sub, err := cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:40458|term-length=64k", 7)
	require.NoError(t, err)
	var subT *fakeTransport
	require.Eventually(t, func() bool { subT = m.transport(netip.MustParseAddrPort("127.0.0.1:40458")); return subT != nil }, 10*time.Second, time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := cl.AddCounter(ctx, 1001, nil, "held")
		done <- err
	}()
	<-entered
	const sessions = commandQueueCapacity + 200
	setup := func(session int32) []byte {
		s := protocol.Setup{SessionID: session, StreamID: 7, InitialTermID: 5, ActiveTermID: 5, TermLength: 64 << 10, MTU: 1408}
		b := make([]byte, protocol.SetupHeaderLength)
		_, err := s.Encode(b)
		require.NoError(t, err)
		return b
	}
	from := netip.MustParseAddrPort("127.0.0.1:40999")
	for i := range int32(sessions) {
		subT.push(from, setup(1000+i))
	}
	require.Eventually(t, func() bool { return subT.pending() == 0 }, 10*time.Second, time.Millisecond,
		"the receiver reads on while the conductor's queue is full")
	require.Positive(t, cl.CounterValue(sysFailedOffersConductor), "the failed offers are counted")
	// the subscription goes first, so that the queued requests make no
	// images (1,024 logs would only slow the test down)
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	time.Sleep(50 * time.Millisecond)
	close(hold)
	require.NoError(t, <-done)
	require.NoError(t, <-closed)
	sub, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:40458|term-length=64k", 7)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the new subscription's endpoint: the last transport on the address
		m.mu.Lock()
		defer m.mu.Unlock()
		n := len(m.transports)
		subT = m.transports[n-1]
		return n > 1 && subT.bind == netip.MustParseAddrPort("127.0.0.1:40458")
	}, 10*time.Second, time.Millisecond)
	// a later SETUP of a session that did not fit gets its image
	last := int32(1000 + sessions - 1)
	require.Eventually(t, func() bool {
		subT.push(from, setup(last))
		for _, img := range sub.Images() {
			if img.SessionID() == last {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond)
}
