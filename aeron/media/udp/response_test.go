package udp_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// responseRoundTrip runs a request/response exchange over response
// channels (control-mode=response), as Archive's replay does: the
// requester's client on requester, the server's on server (both may be the
// same driver). The server answers each request on a response publication
// made for the request's image; the requester gets every answer, in order,
// on its response subscription, from that publication's session only.
func responseRoundTrip(t *testing.T, requester, server string) {
	ctx := context.Background()
	rc, sc := connect(t, requester), connect(t, server)
	reqChannel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
	control := "127.0.0.1:" + strconv.Itoa(freePort(t))
	srvSub, err := sc.AddSubscription(ctx, reqChannel, 10)
	require.NoError(t, err)
	rspSub, err := rc.AddSubscription(ctx, "aeron:udp?control-mode=response|control="+control, 11)
	require.NoError(t, err)
	reqPub, err := rc.AddPublication(ctx, reqChannel+"|response-correlation-id="+strconv.FormatInt(rspSub.RegistrationID(), 10), 10)
	require.NoError(t, err)
	waitFor(t, "the request image", func() bool { return srvSub.ImageCount() == 1 && reqPub.IsConnected() })
	img := srvSub.Images()[0]
	rspPub, err := sc.AddPublication(ctx, "aeron:udp?control-mode=response|control="+control+"|response-correlation-id="+strconv.FormatInt(img.CorrelationID(), 10), 11)
	require.NoError(t, err)
	waitFor(t, "the response channel connected", func() bool { return rspPub.IsConnected() && rspSub.ImageCount() == 1 })
	require.Equal(t, rspPub.SessionID(), rspSub.Images()[0].SessionID(), "the response subscription reads the response publication's session")

	const n = 50
	var requests, answers []string
	serve := func() {
		srvSub.Poll(func(b []byte, _ *logbuffer.Header) {
			requests = append(requests, string(b))
			answer := []byte("answer to " + string(b))
			for rspPub.Offer(answer) < 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}, 10)
	}
	for i := range n {
		req := []byte(fmt.Sprintf("request %d", i))
		for reqPub.Offer(req) < 0 {
			time.Sleep(50 * time.Microsecond)
		}
		end := time.Now().Add(deadline)
		for len(answers) <= i {
			require.False(t, time.Now().After(end), "no answer to request %d", i)
			serve()
			rspSub.Poll(func(b []byte, _ *logbuffer.Header) { answers = append(answers, string(b)) }, 10)
		}
	}
	for i := range n {
		require.Equal(t, fmt.Sprintf("request %d", i), requests[i])
		require.Equal(t, fmt.Sprintf("answer to request %d", i), answers[i])
	}
}

// TestResponseChannelRoundTrip: response channels on one driver and
// between two, ibgo's and, with AERON_C_BIN, Aeron's C driver; with it
// the mixed pairs (ibgo requester to C server and back) prove the wire:
// SEND_RESPONSE, RSP_SETUP and the SETUP request of the response
// subscription.
func TestResponseChannelRoundTrip(t *testing.T) {
	kinds := scenarioDrivers(t)
	for _, a := range kinds {
		t.Run(a.name+"/one driver", func(t *testing.T) {
			d := a.start(t, false)
			responseRoundTrip(t, d.Dir(), d.Dir())
		})
		for _, b := range kinds {
			t.Run(a.name+" requester, "+b.name+" server", func(t *testing.T) {
				responseRoundTrip(t, a.start(t, false).Dir(), b.start(t, false).Dir())
			})
		}
	}
}

// TestResponseChannelErrors: what C refuses, with C's words: a response
// publication without response-correlation-id, for an image that does not
// exist or did not ask for a response channel; a request publication whose
// response subscription does not exist; a response subscription whose
// control port is 0.
func TestResponseChannelErrors(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		ctx := context.Background()
		cl, err := client.Connect(ctx, client.Options{Dir: k.start(t, false).Dir(), IdleSleep: 100 * time.Microsecond, OnError: func(error) {}})
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		control := "127.0.0.1:" + strconv.Itoa(freePort(t))
		_, err = cl.AddPublication(ctx, "aeron:udp?control-mode=response|control="+control, 1)
		require.ErrorContains(t, err, "control-mode=response was specified, but no response-correlation-id set")
		_, err = cl.AddPublication(ctx, "aeron:udp?control-mode=response|control="+control+"|response-correlation-id=987654", 1)
		require.ErrorContains(t, err, "image.correlationId=987654 not found")
		_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=127.0.0.1:"+strconv.Itoa(freePort(t))+"|response-correlation-id=987654", 1)
		require.ErrorContains(t, err, "unable to find response subscription for response-correlation-id=987654")
		_, err = cl.AddSubscription(ctx, "aeron:udp?control-mode=response|control=127.0.0.1:0", 1)
		require.ErrorContains(t, err, "control has port=0 for subscription")

		// an image of a publication that asked for nothing
		channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
		sub, err := cl.AddSubscription(ctx, channel, 2)
		require.NoError(t, err)
		pub, err := cl.AddPublication(ctx, channel, 2)
		require.NoError(t, err)
		waitFor(t, "image", func() bool { return sub.ImageCount() == 1 && pub.IsConnected() })
		id := sub.Images()[0].CorrelationID()
		_, err = cl.AddPublication(ctx, "aeron:udp?control-mode=response|control="+control+"|response-correlation-id="+strconv.FormatInt(id, 10), 2)
		require.ErrorContains(t, err, "image.correlationId="+strconv.FormatInt(id, 10)+" did not request a response channel")
	})
}
