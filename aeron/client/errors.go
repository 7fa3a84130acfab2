package client

import (
	"errors"
	"fmt"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// Errors of the client itself.
var (
	// ErrDriverTimeout: the driver's heartbeat in the CnC file is older
	// than the driver timeout, or no driver started in the directory.
	ErrDriverTimeout = errors.New("aeron client: driver timeout")
	// ErrClientTimeout: the driver timed this client out (ON_CLIENT_TIMEOUT)
	// and released its resources.
	ErrClientTimeout = errors.New("aeron client: timed out by the driver")
	// ErrClosed: the client or resource is closed.
	ErrClosed = errors.New("aeron client: closed")
	// ErrResponseTimeout: the driver did not answer a command in time.
	ErrResponseTimeout = errors.New("aeron client: no response from the driver")
)

// ErrorCode is an ON_ERROR code (aeron_control_protocol.h); a plain value.
type ErrorCode int32

// Error codes.
const (
	InvalidChannel                 ErrorCode = cnc.ErrorCodeInvalidChannel
	UnknownSubscription            ErrorCode = cnc.ErrorCodeUnknownSubscription
	UnknownPublication             ErrorCode = cnc.ErrorCodeUnknownPublication
	ChannelEndpointError           ErrorCode = cnc.ErrorCodeChannelEndpointError
	UnknownCounter                 ErrorCode = cnc.ErrorCodeUnknownCounter
	UnknownCommandTypeID           ErrorCode = cnc.ErrorCodeUnknownCommandTypeID
	MalformedCommand               ErrorCode = cnc.ErrorCodeMalformedCommand
	NotSupported                   ErrorCode = cnc.ErrorCodeNotSupported
	UnknownHost                    ErrorCode = cnc.ErrorCodeUnknownHost
	ResourceTemporarilyUnavailable ErrorCode = cnc.ErrorCodeResourceTemporarilyUnavailable
	GenericError                   ErrorCode = cnc.ErrorCodeGenericError
	StorageSpace                   ErrorCode = cnc.ErrorCodeStorageSpace
	ImageRejected                  ErrorCode = cnc.ErrorCodeImageRejected
	PublicationRevoked             ErrorCode = cnc.ErrorCodePublicationRevoked
)

var codeNames = map[ErrorCode]string{
	InvalidChannel: "INVALID_CHANNEL", UnknownSubscription: "UNKNOWN_SUBSCRIPTION", UnknownPublication: "UNKNOWN_PUBLICATION",
	ChannelEndpointError: "CHANNEL_ENDPOINT_ERROR", UnknownCounter: "UNKNOWN_COUNTER", UnknownCommandTypeID: "UNKNOWN_COMMAND_TYPE_ID",
	MalformedCommand: "MALFORMED_COMMAND", NotSupported: "NOT_SUPPORTED", UnknownHost: "UNKNOWN_HOST",
	ResourceTemporarilyUnavailable: "RESOURCE_TEMPORARILY_UNAVAILABLE", GenericError: "GENERIC_ERROR",
	StorageSpace: "STORAGE_SPACE", ImageRejected: "IMAGE_REJECTED", PublicationRevoked: "PUBLICATION_REVOKED",
}

func (c ErrorCode) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("error code %d", int32(c))
}

// DriverError is an ON_ERROR answer of the driver to one of this client's
// commands. Match it with errors.As, or errors.Is against an ErrorCode.
// Immutable once returned; safe to share.
type DriverError struct {
	Code          ErrorCode
	Message       string
	CorrelationID int64
}

func (e *DriverError) Error() string {
	return fmt.Sprintf("aeron driver: %s: %s (correlation id %d)", e.Code, e.Message, e.CorrelationID)
}

// Is lets errors.Is(err, client.InvalidChannel) work.
func (e *DriverError) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

// Error makes an ErrorCode usable as an errors.Is target.
func (c ErrorCode) Error() string { return c.String() }
