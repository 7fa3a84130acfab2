package udp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// countersOf lists a running driver's counters of typeID (a copy each).
func countersOf(t *testing.T, d *driver.Driver, typeID int32) []cnc.Counter {
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	r, err := f.Counters()
	require.NoError(t, err)
	var out []cnc.Counter
	r.ForEach(func(c cnc.Counter) bool {
		if c.TypeID == typeID {
			c.Key = append([]byte(nil), c.Key...)
			out = append(out, c)
		}
		return true
	})
	return out
}

// checkLocalSockaddr checks a *-local-sockaddr counter against the C
// driver's layout (aeron_local_sockaddr_key_layout_t: channel status id,
// length, address) and label ("<name>: <status id> <address>"), and
// returns the address.
func checkLocalSockaddr(t *testing.T, c cnc.Counter, name string, statusID int32) string {
	t.Helper()
	require.Equal(t, int32(statusID), int32(binary.LittleEndian.Uint32(c.Key)), "key: the channel status counter id")
	n := int(binary.LittleEndian.Uint32(c.Key[4:]))
	addr := string(c.Key[8 : 8+n])
	require.Equal(t, fmt.Sprintf("%s: %d %s", name, statusID, addr), c.Label)
	require.Equal(t, int64(client.ChannelStatusActive), c.Value)
	return addr
}

// TestSendEndpointSharedByPublications: publications whose channels name
// the same endpoint share one send channel endpoint as in the C driver
// (aeron_driver_conductor_get_or_add_send_channel_endpoint): one socket,
// one snd-channel counter, ACTIVE, whose id each publication is given,
// with its snd-local-sockaddr naming the bound port; parameters in
// another order give the same publication; streams on it are delivered
// independently; the endpoint and its counters go with the last
// publication.
func TestSendEndpointSharedByPublications(t *testing.T) {
	sd, _ := startDriver(t, udp.Loss{}, nil)
	sc := connect(t, sd.Dir())
	ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx := context.Background()
	var subs []*client.Subscription
	for _, stream := range []int32{1001, 1002} {
		sub, err := sc.AddSubscription(ctx, "aeron:udp?endpoint="+ep, stream)
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	// the receive endpoint: one rcv-channel for both subscriptions
	rcv := countersOf(t, sd, cnc.TypeReceiveChannelStatus)
	require.Len(t, rcv, 1, "one receive channel endpoint")
	assert.Equal(t, "rcv-channel: aeron:udp?endpoint="+ep+" "+ep, rcv[0].Label)
	assert.Equal(t, int64(client.ChannelStatusActive), rcv[0].Value)
	for _, s := range subs {
		assert.Equal(t, rcv[0].ID, s.ChannelStatusID())
		assert.Equal(t, int64(client.ChannelStatusActive), s.ChannelStatus())
	}
	rl := countersOf(t, sd, cnc.TypeLocalSockAddr)
	require.Len(t, rl, 1)
	assert.Equal(t, ep, checkLocalSockaddr(t, rl[0], "rcv-local-sockaddr", rcv[0].ID))

	pd, _ := startDriver(t, udp.Loss{}, nil)
	pc := connect(t, pd.Dir())
	a, err := pc.AddPublication(ctx, "aeron:udp?endpoint="+ep+"|term-length=64k", 1001)
	require.NoError(t, err)
	b, err := pc.AddPublication(ctx, "aeron:udp?term-length=64k|endpoint="+ep, 1001)
	require.NoError(t, err)
	require.Equal(t, a.OriginalRegistrationID(), b.OriginalRegistrationID(), "reordered parameters: one publication")
	require.Equal(t, a.SessionID(), b.SessionID())
	x, err := pc.AddExclusivePublication(ctx, "aeron:udp?endpoint="+ep, 1002)
	require.NoError(t, err)

	snd := countersOf(t, pd, cnc.TypeSendChannelStatus)
	require.Len(t, snd, 1, "one send channel endpoint for both streams and the exclusive publication")
	assert.Equal(t, int64(client.ChannelStatusActive), snd[0].Value)
	assert.Equal(t, a.OriginalRegistrationID(), snd[0].RegistrationID, "the counter carries the first publication's registration id")
	for _, p := range []*client.Publication{a, b, x} {
		assert.Equal(t, snd[0].ID, p.ChannelStatusID())
		assert.Equal(t, int64(client.ChannelStatusActive), p.ChannelStatus())
	}
	n := int(binary.LittleEndian.Uint32(snd[0].Key))
	assert.Equal(t, "aeron:udp?endpoint="+ep+"|term-length=64k", string(snd[0].Key[4:4+n]), "key: the channel")
	sl := countersOf(t, pd, cnc.TypeLocalSockAddr)
	require.Len(t, sl, 1, "one socket sends for all publications")
	local := checkLocalSockaddr(t, sl[0], "snd-local-sockaddr", snd[0].ID)
	ap, err := netip.ParseAddrPort(local)
	require.NoError(t, err, "the bound address %q", local)
	assert.NotZero(t, ap.Port(), "the ephemeral port is discoverable")
	assert.Equal(t, "snd-channel: aeron:udp?endpoint="+ep+"|term-length=64k "+local, snd[0].Label)

	for _, p := range []*client.Publication{a, x} {
		waitFor(t, "publication connected", p.IsConnected)
	}
	streamTo(t, a, subs[:1], 500, 100)
	streamTo(t, x, subs[1:], 500, 100)

	// the endpoint lives while a publication uses it
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	streamTo(t, x, subs[1:], 100, 100)
	require.Len(t, countersOf(t, pd, cnc.TypeSendChannelStatus), 1)
	require.NoError(t, x.Close())
	waitFor(t, "send endpoint counters freed", func() bool {
		return len(countersOf(t, pd, cnc.TypeSendChannelStatus)) == 0 && len(countersOf(t, pd, cnc.TypeLocalSockAddr)) == 0
	})
	for _, s := range subs {
		require.NoError(t, s.Close())
	}
	waitFor(t, "receive endpoint counters freed", func() bool {
		return len(countersOf(t, sd, cnc.TypeReceiveChannelStatus)) == 0 && len(countersOf(t, sd, cnc.TypeLocalSockAddr)) == 0
	})
}

// TestMDCStreamsShareControl: several streams publish on one
// multi-destination-cast control address (before, the second failed with
// "address in use"): the endpoint's destinations are shared, each stream
// reaches its subscribers, and a spy reads an MDC publication.
func TestMDCStreamsShareControl(t *testing.T) {
	control := "127.0.0.1:" + strconv.Itoa(freePort(t))
	pd, _ := startDriver(t, udp.Loss{}, nil)
	pc := connect(t, pd.Dir())
	ctx := context.Background()
	channel := "aeron:udp?control=" + control + "|control-mode=dynamic"
	var pubs []*client.Publication
	for _, stream := range []int32{1001, 1002} {
		pub, err := pc.AddPublication(ctx, channel, stream)
		require.NoError(t, err, "stream %d", stream)
		pubs = append(pubs, pub)
	}
	require.Len(t, countersOf(t, pd, cnc.TypeSendChannelStatus), 1, "one endpoint on the control address")
	dests := countersOf(t, pd, cnc.TypeMDCDestinations)
	require.Len(t, dests, 1, "mdc-num-dest")
	assert.Equal(t, "mdc-num-dest: "+channel, dests[0].Label)

	spy, err := pc.AddSubscription(ctx, "aeron-spy:"+channel, 1002)
	require.NoError(t, err, "a spy on a multi-destination-cast publication")

	var subs [2][2]*client.Subscription // [driver][stream]
	for i := range subs {
		sd, _ := startDriver(t, udp.Loss{}, nil)
		sc := connect(t, sd.Dir())
		ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
		for j, stream := range []int32{1001, 1002} {
			sub, err := sc.AddSubscription(ctx, "aeron:udp?endpoint="+ep+"|control="+control+"|control-mode=dynamic", stream)
			require.NoError(t, err)
			subs[i][j] = sub
		}
	}
	for _, p := range pubs {
		waitFor(t, "publication connected", p.IsConnected)
	}
	waitFor(t, "two destinations", func() bool { return countersOf(t, pd, cnc.TypeMDCDestinations)[0].Value == 2 })
	for j, p := range pubs {
		targets := []*client.Subscription{subs[0][j], subs[1][j]}
		if j == 1 {
			targets = append(targets, spy)
		}
		for _, s := range targets {
			waitFor(t, "image available", s.IsConnected)
		}
		streamTo(t, p, targets, 300, 100)
	}
}

// TestRejectImage: a subscriber rejects its image (REJECT_IMAGE, Java's
// Image.reject): its driver counts it (42), stops taking the stream's data
// and answers with ERR frames instead of status messages (39); the
// publisher's driver counts them (38), drops that receiver, logs the
// error and tells its clients ON_PUBLICATION_ERROR with the receiver's
// address and the reason; the image then ends at its liveness timeout.
func TestRejectImage(t *testing.T) {
	pd, _ := startDriver(t, udp.Loss{}, nil)
	sd, _ := startDriver(t, udp.Loss{}, func(c *driver.Config) { c.ImageLivenessTimeout = time.Second })
	pubErrs := make(chan cnc.PublicationError, 64)
	pc, err := client.Connect(context.Background(), client.Options{Dir: pd.Dir(), IdleSleep: 100 * time.Microsecond,
		OnPublicationError: func(e cnc.PublicationError) { pubErrs <- e }})
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	sc := connect(t, sd.Dir())
	ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx := context.Background()
	gone := make(chan *client.Image, 4)
	sub, err := sc.AddSubscriptionWithHandlers(ctx, "aeron:udp?endpoint="+ep, 1001, nil, func(img *client.Image) { gone <- img })
	require.NoError(t, err)
	pub, err := pc.AddPublication(ctx, "aeron:udp?endpoint="+ep, 1001)
	require.NoError(t, err)
	waitFor(t, "connected", func() bool { return pub.IsConnected() && sub.IsConnected() })
	streamTo(t, pub, []*client.Subscription{sub}, 100, 64)

	img := sub.Images()[0]
	require.NoError(t, img.Reject(ctx, "not this one"))
	require.EqualValues(t, 1, systemCounter(t, sd, "Images rejected"))

	select {
	case pe := <-pubErrs:
		assert.Equal(t, pub.OriginalRegistrationID(), pe.RegistrationID)
		assert.EqualValues(t, -1, pe.DestinationRegistrationID)
		assert.Equal(t, pub.SessionID(), pe.SessionID)
		assert.EqualValues(t, 1001, pe.StreamID)
		assert.EqualValues(t, cnc.ErrorCodeImageRejected, pe.ErrorCode)
		assert.Equal(t, "not this one", pe.Message)
		assert.Equal(t, "127.0.0.1", pe.Source.Addr().String(), "the receiver's address")
		assert.NotZero(t, pe.Source.Port())
	case <-time.After(10 * time.Second):
		t.Fatal("no ON_PUBLICATION_ERROR")
	}
	assert.Positive(t, systemCounter(t, sd, "Error Frames sent"))
	assert.Positive(t, systemCounter(t, pd, "Error Frames received"))
	select {
	case g := <-gone:
		assert.Equal(t, img.CorrelationID(), g.CorrelationID(), "the rejected image ended")
	case <-time.After(10 * time.Second):
		t.Fatal("the rejected image did not end")
	}
	// an image the driver no longer has is refused as C refuses it
	var de *client.DriverError
	require.ErrorAs(t, img.Reject(ctx, "again"), &de)
	assert.Contains(t, de.Message, "Unable to resolve image for correlationId=")
}
