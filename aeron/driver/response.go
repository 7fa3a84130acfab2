package driver

import (
	"fmt"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// Response channels (control-mode=response, response-correlation-id), as
// the C driver 1.48 has them. A client (the requester) adds
//
//   - a response subscription aeron:udp?control-mode=response|control=S,
//     bound to an ephemeral port, which waits, asking for nothing, until it
//     learns its session;
//   - a request publication aeron:udp?endpoint=R|response-correlation-id=<that
//     subscription's registration id>, whose SETUP carries SEND_RESPONSE.
//
// The server subscribes on R and, for the request image, adds a response
// publication aeron:udp?control-mode=response|control=S|response-correlation-id=<the
// image's correlation id>, bound to S and sending nowhere yet. The request
// image's receiver then sends RSP_SETUP (the response publication's
// session) to the request publication with each status message; the
// requester's send endpoint hands it to the conductor (onResponseSetup),
// which gives the response subscription that session and the receiver,
// which asks S for SETUP; the response publication takes the sender of
// that request as where it sends (respDest) and answers. Once it has a
// receiver, the conductor clears the image's response session
// (onResponseConnected) and RSP_SETUP stops.

// responseSessionNone is the request image's response session before a
// response publication names it, and after it connected (C's
// AERON_PUBLICATION_RESPONSE_NULL_RESPONSE_SESSION_ID).
const responseSessionNone = int64(-1) << 60

// responseImage finds the request image a response publication answers
// (aeron_driver_conductor_find_response_publication_image).
func (c *conductor) responseImage(correlationID int64) (*publicationImage, error) {
	if correlationID == -1 {
		return nil, fail(cnc.ErrorCodeGenericError, "control-mode=response was specified, but no response-correlation-id set")
	}
	for _, e := range c.endpoints {
		for _, im := range e.images {
			if im.regID != correlationID || im.state == imageDone {
				continue
			}
			if !im.sendResponseSetup {
				return nil, fail(cnc.ErrorCodeGenericError, "image.correlationId=%d did not request a response channel", correlationID)
			}
			return im, nil
		}
	}
	return nil, fail(cnc.ErrorCodeGenericError, "image.correlationId=%d not found", correlationID)
}

// onResponseSetup: a RSP_SETUP reached request publication whose
// response-correlation-id is subRegID (aeron_driver_conductor_on_response_setup).
// A response subscription still waiting takes responseSessionID as its
// session, and the receiver asks its control address for SETUP; one that
// has its session already asks again.
func (c *conductor) onResponseSetup(subRegID int64, responseSessionID int32) {
	s, ok := c.subs[subRegID]
	if !ok || s.endpoint == "" {
		return
	}
	e, ok := c.endpoints[s.endpoint]
	if !ok {
		return
	}
	r := c.recv
	if !s.awaitingResponse {
		streamID := s.streamID
		c.receiverProxy.offer(func() { r.onRequestSetup(e, streamID) })
		return
	}
	s.awaitingResponse = false
	s.sessionID, s.hasSession = responseSessionID, true
	fmt.Fprintf(c.log, "subscription %d: response session %d\n", s.regID, responseSessionID)
	c.receiverProxy.offer(func() { r.onAddSubscription(e, s) })
}

// onResponseConnected: the response publication answering image
// imageRegID has a receiver, so the image stops sending RSP_SETUP
// (aeron_driver_conductor_on_response_connected). Request publications
// name a subscription here, which no image has as its id.
func (c *conductor) onResponseConnected(imageRegID int64) {
	for _, e := range c.endpoints {
		for _, im := range e.images {
			if im.regID == imageRegID {
				im.responseSession.Store(responseSessionNone)
			}
		}
	}
}

// onRequestSetup: the receiver asks the control address for SETUP of the
// stream at once rather than at the next interval
// (aeron_driver_receiver_on_request_setup).
func (r *receiver) onRequestSetup(e *receiveEndpoint, streamID int32) {
	delete(e.lastControlNs, streamID)
}

// matches says whether subscription s wants the stream and session: a
// response subscription still waiting for its session wants none
// (aeron_driver_conductor_network_subscription_link_matches_allowing_wildcard).
func (s *subLink) matches(streamID, sessionID int32) bool {
	if s.streamID != streamID {
		return false
	}
	if s.hasSession {
		return s.sessionID == sessionID
	}
	return !s.awaitingResponse
}
