package driver

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"sync/atomic"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// The media seam. The C driver abstracts its network transport behind a
// function table (aeron_udp_channel_transport_bindings_t: init, close,
// recvmmsg, send, get_so_rcvbuf, bind_addr_and_port, poller_*). ibgo makes
// the same split per channel, not per driver: each network medium ("udp",
// "ib") registers a Media that opens transports for channels of its own
// scheme, and the sender/receiver agents (frame handling, flow control,
// loss recovery, all media-independent) drive them through these
// interfaces. IPC needs no transport: its publications and images share
// one log and live in the conductor alone.

// Affinity says which agent owns a transport (the C bindings' affinity).
// A plain value.
type Affinity int

// Affinities.
const (
	AffinitySender Affinity = iota
	AffinityReceiver
	AffinityConductor
)

// TransportParams are the per-channel settings a medium needs to open an
// endpoint (aeron_udp_channel_transport_params_t). A plain value.
type TransportParams struct {
	SocketRcvbuf, SocketSndbuf int
	MTU                        int
	// ReceiverWindow is, for a subscription's endpoint, the window its
	// images announce (rcv-wnd, else AERON_RCV_INITIAL_WINDOW_LENGTH): a
	// medium that posts receive buffers sizes its ring for it. 0 on
	// publications.
	ReceiverWindow  int
	MulticastTTL    int
	MediaTimestamps bool
}

// RecvFunc receives one datagram: the frames in buf, where it came from,
// and the media receive timestamp in epoch ns (0 when the medium has none).
// buf is only valid during the call.
type RecvFunc func(t Transport, buf []byte, from netip.AddrPort, mediaTimestampNs int64)

// Transport is one open endpoint of a medium (aeron_udp_channel_transport_t).
// A transport is used by the agent it was opened for only.
type Transport interface {
	// Send sends each of datagrams as one datagram to dest (the connected
	// peer when dest is invalid) and returns how many were sent; fewer
	// than len(datagrams) with no error is a short send (a full socket
	// buffer: Send does not block), which the sender retries from where it
	// stopped (aeron send_func).
	Send(dest netip.AddrPort, datagrams [][]byte) (int, error)
	// Recv hands up to max received datagrams to fn (aeron recvmmsg_func).
	Recv(max int, fn RecvFunc) (int, error)
	// Reconnect re-resolves and reconnects to a new peer address.
	Reconnect(dest netip.AddrPort) error
	// SocketRcvbuf is the receive buffer size, for window validation.
	SocketRcvbuf() (int, error)
	// LocalAddr names the bound endpoint for *-local-sockaddr counters and
	// source identities.
	LocalAddr() string
	// Binding names the medium that opened the transport, so identical
	// endpoints of two media never collide or share state.
	Binding() string
	Close() error
}

// MemoryRegistrar is implemented by a Transport that can send straight
// from memory registered with its device, without copying (aeron:ib posts a
// frame from the publication's term buffer with a scatter/gather entry).
// The driver registers a network publication's whole log once, before the
// sender agent gets the publication, if its transport implements this;
// media without it (udp) are unaffected. Like the rest of a Transport,
// neither RegisterMemory nor release may run concurrently with its other
// methods: the driver calls them only while no agent uses the transport.
type MemoryRegistrar interface {
	// RegisterMemory registers b (the publication's mapped log). A datagram
	// given to Send that lies inside b may then still be read by the device
	// after Send returns, until its send completes; the transport keeps at
	// most maxInFlight bytes of such datagrams posted and not completed
	// (the driver derives the bound from when it cleans the log; see
	// addNetworkPublication), and a datagram beyond it is copied as
	// unregistered memory is. release waits until no posted send reads b
	// any more, then deregisters it; the driver calls it once the sender
	// agent no longer uses the transport, before Close. Registration may
	// happen later than the call (once the medium has a device) and may
	// fail then: the transport then copies, and counts the failure.
	RegisterMemory(b []byte, maxInFlight int) (release func() error, err error)
}

// ImageGrant describes an image whose terms a transport may let its peer
// write into directly (ImageGranter). A plain value; Terms is the image's
// three terms, back to back, never its metadata.
type ImageGrant struct {
	From                netip.AddrPort // the source the image's SETUP came from
	SessionID, StreamID int32
	InitialTermID       int32
	TermLength          int32
	// Position is where the image's data begins (its join position): the
	// first frame a peer places goes there.
	Position int64
	Terms    []byte
	// Rebuilt reads the image's rcv-pos (safe from the receiver agent):
	// a grant made again later starts at the image's position then.
	Rebuilt func() int64
}

// ImageGranter is implemented by a Transport whose peers can place
// frames straight into an image's terms (aeron:ib's ib-mode=write: the
// publisher RDMA-writes them, and the transport hands each placed batch
// to its RecvFunc as a slice of the term itself, its first frame's length
// stored last, so the image finds the frames already in place and copies
// nothing). The receiver agent calls GrantImage when it starts receiving
// into an image from the transport, and the revoke func it returned
// before the image's log may go (the image removed, the endpoint closed):
// after revoke no peer can write into Terms. ok is false when the
// transport does not grant this image (its peer did not ask, or the
// device refused); the image then receives as on any medium. Both run on
// the receiver agent, as the transport's other calls.
type ImageGranter interface {
	GrantImage(g ImageGrant) (revoke func(), ok bool)
}

// Media is a network medium: udp, ib (aeron/media/ib), or a test loss
// generator wrapping another. Implementations are safe for concurrent use
// by the driver's agents.
type Media interface {
	// Name is the URI media name this binding serves ("udp", "ib").
	Name() string
	// Open creates a transport for channel (already validated by
	// aeron/uri), bound to bind and, for unicast senders, connected to
	// connect.
	Open(channel *uri.ChannelURI, bind, connect netip.AddrPort, params TransportParams, affinity Affinity) (Transport, error)
}

// ErrorReporter is implemented by a Media that meets errors outside the
// calls the driver makes into it, or that it recovers from itself (a
// completion queue error, a queue pair gone to the error state, an address
// that no longer resolves), so that they are counted and written to the
// driver's distinct error log with their cause, as the C driver's media do
// through aeron_driver_context's error_log. Start calls SetErrorHandler
// once for each medium it was given, before any Open; report is safe for
// concurrent use from any goroutine, counts the error in the Errors system
// counter, records err.Error() (keep it free of changing numbers: the log
// is distinct by text) and does nothing once the driver is closed. A Media
// serves one driver: a second Start with the same Media replaces the
// handler.
type ErrorReporter interface {
	SetErrorHandler(report func(err error))
}

// BackgroundOpener is implemented by a Media whose Open may wait on the
// fabric: address and route resolution, a connection, a multicast join
// (aeron:ib). The driver then never calls Open for a publication's send
// endpoint on its conductor: CheckOpen validates the channel there and
// returns at once (its error answers the client's command, as an Open
// error would), and Open runs on a goroutine of its own while the
// endpoint's snd-channel counter says INITIALIZING; the endpoint becomes
// ACTIVE, its publications going to the sender, or ERRORED, the error
// going to the error log and to clients as CHANNEL_ENDPOINT_ERROR. The
// conductor meanwhile keeps serving commands, limits, status messages and
// its heartbeat for everything else. CheckOpen is called on the
// conductor, Open concurrently with the medium's other calls.
type BackgroundOpener interface {
	CheckOpen(channel *uri.ChannelURI, bind, connect netip.AddrPort, params TransportParams, affinity Affinity) error
	// OpenContext is Open, ending its waits early when ctx ends (the
	// driver shutting down).
	OpenContext(ctx context.Context, channel *uri.ChannelURI, bind, connect netip.AddrPort, params TransportParams, affinity Affinity) (Transport, error)
}

// MediaStatistic is one running total a medium keeps: a count of events
// (drops, errors, recoveries) or of things it holds. Value is read by
// the driver's conductor while the medium writes it.
type MediaStatistic struct {
	Name  string
	Value *atomic.Int64
}

// StatisticsReporter is implemented by a Media that keeps statistics of
// its own. The driver publishes each as a CnC counter of type
// cnc.TypeMediaStatistic labelled "aeron:<medium>: <name>", so `ibgo
// aeron stat`, Aeron's AeronStat and the metrics endpoint show them,
// refreshing them every few milliseconds. Statistics is called once, at
// Start; the list must not change.
type StatisticsReporter interface {
	Statistics() []MediaStatistic
}

// mediaStatistics are the counters the driver publishes for its media.
type mediaStatistics struct {
	src    []*atomic.Int64
	dst    []*atomic.Int64
	lastNs int64
}

// statisticsRefreshNs is how often the conductor copies the media's
// statistics into their counters.
const statisticsRefreshNs = 10_000_000

func (c *conductor) allocateMediaStatistics(reg mediaRegistry) error {
	names := make([]string, 0, len(reg))
	for n := range reg {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		m := reg[uri.Media(n)]
		r, ok := m.(StatisticsReporter)
		if !ok {
			continue
		}
		for _, st := range r.Statistics() {
			key := append(c.keyBuf[:0], m.Name()...)
			id, err := c.counters.Allocate(cnc.TypeMediaStatistic, key, "aeron:"+m.Name()+": "+st.Name)
			if err != nil {
				return fmt.Errorf("driver: media statistic %q: %w", st.Name, err)
			}
			c.mediaStats.src = append(c.mediaStats.src, st.Value)
			c.mediaStats.dst = append(c.mediaStats.dst, c.counters.Value(id))
		}
	}
	return nil
}

// refreshMediaStatistics copies the media's statistics into their
// counters; allocation-free.
func (c *conductor) refreshMediaStatistics() {
	s := &c.mediaStats
	if len(s.src) == 0 || c.nowNs-s.lastNs < statisticsRefreshNs {
		return
	}
	s.lastNs = c.nowNs
	for i, v := range s.src {
		s.dst[i].Store(v.Load())
	}
}

// mediaRegistry holds the network media the driver was started with.
type mediaRegistry map[uri.Media]Media

func (r mediaRegistry) lookup(m uri.Media) (Media, error) {
	if med, ok := r[m]; ok {
		return med, nil
	}
	return nil, fmt.Errorf("aeron:%s channels are not supported by this driver yet (only aeron:ipc)", m)
}
