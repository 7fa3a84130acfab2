package cnc

// Control protocol message type ids (aeron_control_protocol.h,
// ControlProtocolEvents): commands on the to-driver ring buffer and
// responses on the to-clients broadcast buffer.
const (
	CmdAddPublication              = 0x01
	CmdRemovePublication           = 0x02
	CmdAddExclusivePublication     = 0x03
	CmdAddSubscription             = 0x04
	CmdRemoveSubscription          = 0x05
	CmdClientKeepalive             = 0x06
	CmdAddDestination              = 0x07
	CmdRemoveDestination           = 0x08
	CmdAddCounter                  = 0x09
	CmdRemoveCounter               = 0x0A
	CmdClientClose                 = 0x0B
	CmdAddRcvDestination           = 0x0C
	CmdRemoveRcvDestination        = 0x0D
	CmdTerminateDriver             = 0x0E
	CmdAddStaticCounter            = 0x0F
	CmdRejectImage                 = 0x10
	CmdRemoveDestinationByID       = 0x11
	CmdGetNextAvailableSessionID   = 0x12 // Aeron 1.53
	RspOnError                     = 0x0F01
	RspOnAvailableImage            = 0x0F02
	RspOnPublicationReady          = 0x0F03
	RspOnOperationSuccess          = 0x0F04
	RspOnUnavailableImage          = 0x0F05
	RspOnExclusivePublicationReady = 0x0F06
	RspOnSubscriptionReady         = 0x0F07
	RspOnCounterReady              = 0x0F08
	RspOnUnavailableCounter        = 0x0F09
	RspOnClientTimeout             = 0x0F0A
	RspOnStaticCounter             = 0x0F0B
	RspOnPublicationError          = 0x0F0C
	RspOnNextAvailableSessionID    = 0x0F0D // Aeron 1.53
)

// Error codes carried by ON_ERROR (aeron_control_protocol.h).
const (
	ErrorCodeInvalidChannel                 = 1
	ErrorCodeUnknownSubscription            = 2
	ErrorCodeUnknownPublication             = 3
	ErrorCodeChannelEndpointError           = 4
	ErrorCodeUnknownCounter                 = 5
	ErrorCodeUnknownCommandTypeID           = 6
	ErrorCodeMalformedCommand               = 7
	ErrorCodeNotSupported                   = 8
	ErrorCodeUnknownHost                    = 9
	ErrorCodeResourceTemporarilyUnavailable = 10
	ErrorCodeGenericError                   = 11
	ErrorCodeStorageSpace                   = 12
	ErrorCodeImageRejected                  = 13
	ErrorCodePublicationRevoked             = 14
)

var messageNames = map[int32]string{
	CmdAddPublication: "ADD_PUBLICATION", CmdRemovePublication: "REMOVE_PUBLICATION",
	CmdAddExclusivePublication: "ADD_EXCLUSIVE_PUBLICATION", CmdAddSubscription: "ADD_SUBSCRIPTION",
	CmdRemoveSubscription: "REMOVE_SUBSCRIPTION", CmdClientKeepalive: "CLIENT_KEEPALIVE",
	CmdAddDestination: "ADD_DESTINATION", CmdRemoveDestination: "REMOVE_DESTINATION",
	CmdAddCounter: "ADD_COUNTER", CmdRemoveCounter: "REMOVE_COUNTER", CmdClientClose: "CLIENT_CLOSE",
	CmdAddRcvDestination: "ADD_RCV_DESTINATION", CmdRemoveRcvDestination: "REMOVE_RCV_DESTINATION",
	CmdTerminateDriver: "TERMINATE_DRIVER", CmdAddStaticCounter: "ADD_STATIC_COUNTER",
	CmdRejectImage: "REJECT_IMAGE", CmdRemoveDestinationByID: "REMOVE_DESTINATION_BY_ID",
	CmdGetNextAvailableSessionID: "GET_NEXT_AVAILABLE_SESSION_ID",
	RspOnError:                   "ON_ERROR", RspOnAvailableImage: "ON_AVAILABLE_IMAGE", RspOnPublicationReady: "ON_PUBLICATION_READY",
	RspOnOperationSuccess: "ON_OPERATION_SUCCESS", RspOnUnavailableImage: "ON_UNAVAILABLE_IMAGE",
	RspOnExclusivePublicationReady: "ON_EXCLUSIVE_PUBLICATION_READY", RspOnSubscriptionReady: "ON_SUBSCRIPTION_READY",
	RspOnCounterReady: "ON_COUNTER_READY", RspOnUnavailableCounter: "ON_UNAVAILABLE_COUNTER",
	RspOnClientTimeout: "ON_CLIENT_TIMEOUT", RspOnStaticCounter: "ON_STATIC_COUNTER",
	RspOnPublicationError: "ON_PUBLICATION_ERROR", RspOnNextAvailableSessionID: "ON_NEXT_AVAILABLE_SESSION_ID",
}

// MessageName names a control protocol message type id, or "" if unknown.
func MessageName(typeID int32) string { return messageNames[typeID] }
