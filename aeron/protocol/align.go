package protocol

// Align rounds n up to a multiple of alignment, which must be a power of two
// (mirrors AERON_ALIGN).
func Align(n, alignment int) int { return (n + alignment - 1) &^ (alignment - 1) }

// Align32 is Align for int32 values (term offsets and frame lengths).
func Align32(n, alignment int32) int32 { return (n + alignment - 1) &^ (alignment - 1) }

// AlignedFrameLength is the space a frame of frameLength bytes takes in a term:
// frames start at multiples of FrameAlignment.
func AlignedFrameLength(frameLength int32) int32 { return Align32(frameLength, FrameAlignment) }

// IsAligned reports whether n is a multiple of alignment (a power of two).
func IsAligned(n, alignment int) bool { return n&(alignment-1) == 0 }

// IsPowerOfTwo reports whether n is a positive power of two.
func IsPowerOfTwo(n int64) bool { return n > 0 && n&(n-1) == 0 }

// ComputeMaxMessageLength is the largest message a publication with the given
// term length accepts: an eighth of the term, at most 16 MiB
// (mirrors aeron_compute_max_message_length).
func ComputeMaxMessageLength(termLength int) int { return min(termLength/8, MaxMessageLength) }

// MaxPayloadLength is the payload that fits one DATA frame for an MTU.
func MaxPayloadLength(mtu int) int { return mtu - DataHeaderLength }
