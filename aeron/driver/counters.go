package driver

import (
	"encoding/binary"
	"fmt"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// System counter ids (aeron_system_counters.h).
const (
	sysBytesSent               = 0
	sysBytesReceived           = 1
	sysFailedOffersReceiver    = 2
	sysFailedOffersSender      = 3
	sysFailedOffersConductor   = 4
	sysNaksSent                = 5
	sysNaksReceived            = 6
	sysStatusMessagesSent      = 7
	sysStatusMessagesReceived  = 8
	sysHeartbeatsSent          = 9
	sysHeartbeatsReceived      = 10
	sysRetransmitsSent         = 11
	sysFlowControlUnderRuns    = 12
	sysFlowControlOverRuns     = 13
	sysInvalidPackets          = 14
	sysErrors                  = 15
	sysShortSends              = 16
	sysFailedLogFrees          = 17
	sysSenderFlowControlLimits = 18
	sysUnblockedPublications   = 19
	sysUnblockedCommands       = 20
	sysPossibleTTLAsymmetry    = 21
	sysClientTimeouts          = 24
	sysResolutionChanges       = 25
	sysConductorMaxCycleTime   = 26
	sysConductorCycleThreshold = 27
	sysSenderMaxCycleTime      = 28
	sysSenderCycleThreshold    = 29
	sysReceiverMaxCycleTime    = 30
	sysReceiverCycleThreshold  = 31
	sysAeronVersion            = 34
	sysRetransmittedBytes      = 36
	sysBytesMapped             = 35
	sysErrorFramesReceived     = 38
	sysErrorFramesSent         = 39
	sysPublicationsRevoked     = 40
	sysImagesRevoked           = 41
	sysImagesRejected          = 42
	sysControlProtocolVersion  = 43
	// ibgo's own, after the C driver's: streams that ended short of what
	// was offered (lifecycle.go)
	sysPublicationsEndedShort    = 46
	sysImagesEndedShort          = 47
	systemCounterCount           = 48
	conductorCycleThresholdNs    = 1_000_000_000 // AERON_CONDUCTOR_CYCLE_THRESHOLD
	channelStatusNotAllocated    = -1            // AERON_CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED
	publicationReservedSessionLo = -1            // AERON_PUBLICATION_RESERVED_SESSION_ID_LOW
	publicationReservedSessionHi = 1000          // AERON_PUBLICATION_RESERVED_SESSION_ID_HIGH
)

// systemCounterLabels are the labels as the C driver writes them: 1.48's
// ids 0..39 with their suffixes (version, threading mode), then 1.53's
// 40..45, which ibgo publishes so that counter 43 carries the control
// protocol version.
func systemCounterLabels(mode ThreadingMode) []string {
	labels := append([]string(nil), cnc.SystemCounterLabels...)
	ver := fmt.Sprintf("version=%s commit=ibgo", Version)
	labels[sysErrors] += ": " + ver
	labels[25] += ": driverName="
	for _, i := range []int{26, 28, 30} {
		labels[i] += ": " + string(mode)
		labels[i+1] += fmt.Sprintf(": threshold=%dns %s", conductorCycleThresholdNs, mode)
	}
	labels[sysAeronVersion] += ": " + ver
	return append(labels, "Publications Revoked", "Publication Images Revoked", "Images rejected",
		"Control protocol version", "Status Messages rejected", "Failed offers to NativeResourceAgentProxy",
		"Publications ended with data unsent (ibgo)", "Images ended without end of stream (ibgo)")
}

// streamKey is the key of stream position counters
// (aeron_stream_position_counter_key_layout_t).
func streamKey(dst []byte, registrationID int64, sessionID, streamID int32, channel string) []byte {
	dst = binary.LittleEndian.AppendUint64(dst[:0], uint64(registrationID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(sessionID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(streamID))
	n := min(len(channel), cnc.MaxKeyLength-20)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	return append(dst, channel[:n]...)
}

// streamLabel is the C driver's "<name>: <reg> <session> <stream> <channel> <suffix>".
func streamLabel(name string, registrationID int64, sessionID, streamID int32, channel, suffix string) string {
	return fmt.Sprintf("%s: %d %d %d %s %s", name, registrationID, sessionID, streamID, channel, suffix)
}
