package driver

// sysRetransmitOverflow is "Retransmit Pool Overflow count"
// (AERON_SYSTEM_COUNTER_RETRANSMIT_OVERFLOW).
const sysRetransmitOverflow = 37

// maxResendDefault is AERON_MAX_RESEND_DEFAULT: the retransmit actions a
// publication with group semantics keeps.
const maxResendDefault = 16

type rtxState uint8

const (
	rtxInactive rtxState = iota
	rtxLingering
)

type retransmitAction struct {
	state              rtxState
	termID, termOffset int32
	length             int32
	expiryNs           int64
}

// retransmitHandler is aeron_retransmit_handler.c with the C driver's
// default retransmit delay of 0: a NAK is resent at once and its action
// then lingers, absorbing NAKs that start inside its range. Unicast keeps
// one action, which a NAK outside its range replaces (aeron-io/aeron
// #1603); group semantics (multicast) keep max-resend actions, and a NAK
// finding none free is dropped and counted as a pool overflow. Owned by
// the publication's sender duty.
type retransmitHandler struct {
	actions []retransmitAction
	active  int
}

// newRetransmitHandler: max_retransmits = has_group_semantics ? max_resend : 1.
func newRetransmitHandler(group bool, maxResend int) retransmitHandler {
	n := 1
	if group {
		n = max(maxResend, 1)
	}
	return retransmitHandler{actions: make([]retransmitAction, n)}
}

// claim returns the action to resend (termID, termOffset) with, or nil
// when an active action covers it or the pool is exhausted (overflow).
func (h *retransmitHandler) claim(termID, termOffset int32) (a *retransmitAction, overflow bool) {
	var free *retransmitAction
	for i := range h.actions {
		x := &h.actions[i]
		if x.state == rtxInactive {
			if free == nil {
				free = x
			}
			continue
		}
		if x.termID == termID && x.termOffset <= termOffset && termOffset < x.termOffset+x.length {
			return nil, false
		}
	}
	if free == nil {
		if len(h.actions) == 1 {
			return &h.actions[0], false // unicast: the new NAK replaces the lingering one
		}
		return nil, true
	}
	h.active++
	return free, false
}

func (h *retransmitHandler) linger(a *retransmitAction, termID, termOffset, length int32, expiryNs int64) {
	a.state, a.termID, a.termOffset, a.length, a.expiryNs = rtxLingering, termID, termOffset, length, expiryNs
}

// processTimeouts ends lingering actions whose time is up.
func (h *retransmitHandler) processTimeouts(nowNs int64) {
	if h.active == 0 {
		return
	}
	for i := range h.actions {
		if a := &h.actions[i]; a.state == rtxLingering && nowNs > a.expiryNs {
			a.state = rtxInactive
			h.active--
		}
	}
}
