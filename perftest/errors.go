package perftest

import (
	"fmt"
	"strings"

	"github.com/ibgo/ibgo/uverbs"
)

// ErrorKind classifies a failed run.
type ErrorKind int

const (
	KindConfig     ErrorKind = iota + 1 // the configuration cannot run (here, or with this device's MTU)
	KindDevice                          // no such device, port or GID; the device cannot be opened or queried
	KindResource                        // creating a verbs object or moving a QP to a state failed
	KindSession                         // the out-of-band TCP connection or one of its exchanges failed
	KindMismatch                        // the peer runs another version, key form, GID type or other options
	KindPeerGone                        // the peer closed the out-of-band connection during the test
	KindPost                            // posting a work request failed
	KindPoll                            // polling a CQ failed
	KindCompletion                      // a work completion has an error status
	KindStall                           // the peer sent nothing for 60 seconds
)

var kindNames = [...]string{"", "configuration", "device", "resource", "session", "mismatch", "peer gone", "post", "poll", "completion", "stall"}

func (k ErrorKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// op is what was being attempted; the printer keys perftest's wording on it.
type op int

const (
	opNone op = iota
	opFindDevice
	opNoDevices
	opOpenDevice
	opQueryDevice
	opQueryPort
	opPortCount
	opPortState
	opMTU
	opQueryGIDs
	opGIDIndex
	opAllocPD
	opAllocBuf
	opRegMR
	opCreateCQ
	opCreateSRQ
	opCreateQP
	opQPInit
	opQPConnect
	opCreateAH
	opDial
	opListen
	opAccept
	opDontXchg
	opUDSize
	opGIDTypes
	opVersion
	opExchange
	opSysData
	opParams
	opParamsParse
	opKeyForm
	opReadKey
	opParseKey
	opWriteKey
	opPostRecv
	opPostSend
	opPollSend
	opPollRecv
	opCompletion
	opPeerGone
	opStall
	opWarmUp
	opCheck
	opCompChannel
	opCompVector
	opReqNotify
	opCQEvent
	opEventStall
	opAttachMcast
	opMcastIB
	opCMConnect
)

var opNames = map[op]string{
	opFindDevice: "find the device", opNoDevices: "list devices", opOpenDevice: "open the device",
	opQueryDevice: "query the device", opQueryPort: "query the port", opPortCount: "check the port number",
	opPortState: "check the port state", opMTU: "check the MTU", opQueryGIDs: "query the GID table",
	opGIDIndex: "find the GID index", opAllocPD: "allocate a PD", opAllocBuf: "allocate the buffer",
	opRegMR: "register the buffer", opCreateCQ: "create a CQ", opCreateSRQ: "create the SRQ",
	opCreateQP: "create a QP", opQPInit: "move the QP to INIT", opQPConnect: "move the QP to RTR/RTS",
	opCreateAH: "create an AH", opDial: "connect to the server", opListen: "listen", opAccept: "accept the client",
	opDontXchg: "run without exchanging versions", opUDSize: "fit the UD message in the MTU",
	opGIDTypes: "compare GID types", opVersion: "check the peer's version", opExchange: "exchange data with the peer",
	opSysData: "exchange page and cache line sizes", opParams: "compare parameters with the peer",
	opParamsParse: "read the peer's parameters", opKeyForm: "read the peer's key message",
	opReadKey: "read the peer's key message", opParseKey: "parse the peer's key message",
	opWriteKey: "write the key message", opPostRecv: "post a receive", opPostSend: "post a send",
	opPollSend: "poll the send CQ", opPollRecv: "poll the receive CQ", opCompletion: "complete a work request",
	opPeerGone: "run the test", opStall: "receive", opWarmUp: "warm up", opCheck: "check the configuration",
	opCompChannel: "create the completion channel", opCompVector: "check the completion vector",
	opAttachMcast: "attach the QP to the multicast group", opMcastIB: "use multicast", opCMConnect: "connect the QPs with rdma_cm",
	opReqNotify: "request CQ notification", opCQEvent: "wait for a CQ event", opEventStall: "wait for a CQ event",
}

// Error is why a run failed (a value: safe to read from any goroutine).
// It carries the facts; perftest's wording for
// them is applied when the error is printed (PrintError), so scripts that
// parse perftest's stderr keep working. Which fields are set depends on
// Kind and the operation.
type Error struct {
	Kind ErrorKind
	op   op

	Device string // the RDMA device
	Port   int    // the device port, or the TCP port for listen
	Addr   string // the server's host:port (KindSession)
	QP     int    // the QP's index in the test (posts, completions)
	QPN    uint32 // the QP's number (state changes)
	Value  int    // a number the check was about: a port count, an MTU, a GID index, a count
	Text   string // a fact in words: a port state, the peer's version or key, a GID pair

	Diffs []string // KindMismatch between ibgo peers: one line per differing option

	Side       string    // KindCompletion: "client" or "server", as perftest names it
	WC         uverbs.WC // KindCompletion
	Sent, Done uint64    // counts at the time: posted and completed (or received)

	Err error // the underlying error (an errno from the kernel, a net error)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("perftest: ")
	b.WriteString(opNames[e.op])
	if e.Device != "" {
		fmt.Fprintf(&b, " (device %s)", e.Device)
	}
	switch e.Kind {
	case KindCompletion:
		fmt.Fprintf(&b, ": %s: status %s, wr_id %d, vendor error 0x%x", e.Side, e.WC.Status, e.WC.WRID, e.WC.VendorErr)
	case KindMismatch:
		if len(e.Diffs) > 0 {
			b.WriteString(": " + strings.Join(e.Diffs, "; "))
		}
	case KindPeerGone:
		b.WriteString(": the peer closed the out-of-band connection")
	}
	switch {
	case e.op == opVersion:
		fmt.Fprintf(&b, ": the peer speaks %q, older than 5.70", e.Text)
	case e.Text != "" && e.Kind != KindCompletion:
		b.WriteString(": " + e.Text)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, ErrPeerGone) and friends match on the kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.op == opNone && t.Kind == e.Kind
}

// Sentinels for errors.Is: each matches every *Error of its kind.
var (
	ErrMismatch = &Error{Kind: KindMismatch}
	ErrPeerGone = &Error{Kind: KindPeerGone}
)

func errPeerGone() error { return &Error{Kind: KindPeerGone, op: opPeerGone} }

// perftestText is how perftest 4.5 (or ibgo's perftest-styled message,
// where perftest has none) prints e.
func perftestText(e *Error) string {
	err := e.Err
	switch e.op {
	case opNoDevices:
		return fmt.Sprintf(" Did not detect devices \n If device exists, check if driver is up\n %v", err)
	case opFindDevice:
		return fmt.Sprintf(" IB device %s not found\n %v", e.Device, err)
	case opOpenDevice:
		return fmt.Sprintf(" Couldn't get context for the device: %v", err)
	case opPortCount:
		return fmt.Sprintf(" Invalid port %d: %s has %d", e.Port, e.Device, e.Value)
	case opPortState:
		return fmt.Sprintf(" Port %d of %s is %s, not PORT_ACTIVE", e.Port, e.Device, e.Text)
	case opMTU:
		return fmt.Sprintf(" Requested mtu is higher than supported by the port (max %d)", e.Value)
	case opGIDIndex:
		return fmt.Sprintf(" Failed to query GID index %d of %s port %d: no such entry", e.Value, e.Device, e.Port)
	case opAllocBuf:
		return fmt.Sprintf(" Couldn't allocate work buf: %v", err)
	case opRegMR:
		return fmt.Sprintf("Couldn't allocate MR: %v", err)
	case opCreateCQ:
		return fmt.Sprintf(" Couldn't create CQ: %v", err)
	case opCreateSRQ:
		return fmt.Sprintf(" Couldn't create SRQ: %v", err)
	case opCreateQP:
		return fmt.Sprintf(" Couldn't create QP: %v", err)
	case opQPInit:
		return fmt.Sprintf(" Failed to modify QP %d to INIT: %v", e.QPN, err)
	case opQPConnect:
		return fmt.Sprintf("Failed to modify QP %d to RTR/RTS: %v\n Unable to Connect the HCA's through the link", e.QPN, err)
	case opCreateAH:
		return fmt.Sprintf("Failed to create AH for UD: %v", err)
	case opDial:
		return fmt.Sprintf("Couldn't connect to %s (retried for %s): %v\n Unable to init the socket connection", e.Addr, e.Text, err)
	case opListen:
		return fmt.Sprintf("Couldn't listen to port %d: %v\n Unable to init the socket connection", e.Port, err)
	case opAccept:
		return fmt.Sprintf("accept on port %d: %v\n Unable to init the socket connection", e.Port, err)
	case opDontXchg:
		return " --dont_xchg_versions: perftest exits against any peer with it (its version check reads an empty version); ibgo refuses it"
	case opUDSize:
		return fmt.Sprintf(" Max message size in UD cannot be greater than MTU (%d)", e.Value)
	case opGIDTypes:
		return "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n (" + e.Text + ")"
	case opVersion:
		return fmt.Sprintf("Current implementation is not compatible with versions older than 5.70 (the peer speaks %q)", e.Text)
	case opExchange:
		return fmt.Sprintf(" Failed to exchange data between server and clients: %v", err)
	case opSysData:
		return fmt.Sprintf(" Failed to exchange Page Size data between server and client: %v", err)
	case opParamsParse:
		return fmt.Sprintf(" the peer's parameter summary does not parse: %v", err)
	case opParams:
		return "parameter mismatch with the peer (both sides must run the same options):\n  " + strings.Join(e.Diffs, "\n  ")
	case opKeyForm:
		return "parameter mismatch: " + e.Text
	case opReadKey:
		if err == nil {
			return "ethernet_read_keys: Couldn't read remote address (the peer closed the connection)"
		}
		return fmt.Sprintf("ethernet_read_keys: Couldn't read remote address: %v", err)
	case opParseKey:
		return fmt.Sprintf("couldn't parse the peer's address <%s>", e.Text)
	case opWriteKey:
		return fmt.Sprintf(" Unable to write to socket: %v", err)
	case opPostRecv:
		return fmt.Sprintf(" Couldn't post receive: qp %d rcnt=%d: %v", e.QP, e.Done, err)
	case opPostSend:
		return fmt.Sprintf("Couldn't post send: qp %d scnt=%d: %v", e.QP, e.Sent, err)
	case opPollSend:
		return fmt.Sprintf("poll CQ failed: %v", err)
	case opPollRecv:
		return fmt.Sprintf("Poll Receive CQ failed: %v", err)
	case opCompletion:
		return fmt.Sprintf(" Completion with error at %s\n Failed status %d (%s): wr_id %d syndrom 0x%x\nscnt=%d, ccnt=%d",
			e.Side, e.WC.Status, e.WC.Status, e.WC.WRID, e.WC.VendorErr, e.Sent, e.Done)
	case opPeerGone:
		return " The peer closed the out-of-band connection during the test (it exited or was killed); stopping"
	case opStall:
		return fmt.Sprintf(" Did not get Message for 60 Seconds (received %d of %d)", e.Done, e.Value)
	case opWarmUp:
		return fmt.Sprintf(" Failed to warm up: %v", err)
	case opCMConnect:
		return fmt.Sprintf("Failed to create RDMA CM connection (QP %d): %v", e.QP, err)
	case opAttachMcast:
		return fmt.Sprintf("Couldn't attach QP to MultiCast group %s: %v", e.Text, err)
	case opMcastIB:
		return " Multicast on InfiniBand needs the group registered with the subnet manager (a MAD through umad), which ibgo does not do; on RoCE it needs nothing"
	case opCompChannel:
		return fmt.Sprintf("Couldn't create completion channel: %v", err)
	case opCompVector:
		return fmt.Sprintf(" Completion vector specified is invalid\n Max completion vector = %d", e.Value-1)
	case opReqNotify:
		return fmt.Sprintf("Couldn't request CQ notification: %v", err)
	case opCQEvent:
		return fmt.Sprintf("Failed to get cq_event: %v", err)
	case opEventStall:
		return fmt.Sprintf(" Did not get Message for 60 Seconds, exiting..\n Total Received=%d, Total Iters Required=%d\n Due to this issue, Perftest cannot produce a report when in event mode.", e.Done, e.Value)
	case opCheck:
		if err != nil {
			return err.Error()
		}
	}
	if err != nil {
		return err.Error()
	}
	return e.Error()
}

func compErr(side string, wc *uverbs.WC, sent, done uint64) error {
	return &Error{Kind: KindCompletion, op: opCompletion, Side: side, WC: *wc, Sent: sent, Done: done}
}
