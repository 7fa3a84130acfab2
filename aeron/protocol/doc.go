// Package protocol encodes and decodes Aeron's UDP wire frames byte for byte
// as the Aeron C driver does (aeron-client/src/main/c/protocol/aeron_udp_protocol.h,
// Java io.aeron.protocol.*Flyweight): DATA and PAD, heartbeats, SETUP, status
// messages with receiver id and optional group tag, NAK, RTT measurement,
// ERROR, RSP_SETUP and driver name resolution (RES).
//
// All fields are little-endian. Each frame type has a value struct with
// Decode and Encode methods that work in place on a byte slice and allocate
// nothing when they succeed. Decoding validates what the Aeron 1.53 receive
// and send endpoints validate (minimum lengths, version 0, frame_length not
// beyond the datagram; DATA term offsets frame aligned) and returns an *Error
// that names the frame, the field and the rule that failed; it never reads
// outside the slice it was given. One 1.53 rule is not applied: a datagram
// of DATA frames whose length is not a multiple of 32 is accepted, as 1.48
// accepts it.
//
// A datagram may carry several frames (the sender batches DATA frames up to
// the MTU): NextFrame walks a datagram frame by frame.
package protocol
