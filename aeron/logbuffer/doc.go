// Package logbuffer implements Aeron's log buffers: the file of three term
// partitions and a metadata section that a publication writes and a
// subscription reads, shared by client and driver processes
// (aeron_logbuffer_descriptor.h, Java io.aeron.logbuffer).
//
// The layout is an ABI: metadata offsets, tail counters packed as
// (term id << 32 | term offset), 32-byte frame alignment, the default frame
// header, and the commit protocol. Writers claim space with an atomic add on
// the active partition's tail, write the header with a negative frame
// length, copy the payload and then store the positive frame length with
// release semantics; readers load frame lengths with acquire semantics and
// stop at the first that is not positive. All shared words go through
// internal/shm.
//
// The pieces mirror Aeron's: TermAppender (claim, unfragmented and
// fragmented append, end-of-term padding) and RotateLog for publications;
// Read (TermReader) for subscriptions; ScanForAvailability (TermScanner)
// for the sender; Insert (TermRebuilder) and ScanForGap (TermGapScanner)
// for the receiver; Unblock (TermUnblocker) for the driver, to pad a claim
// a publisher never committed. Frames found in a term that break the layout (lengths
// that overrun the term) are reported as *CorruptFrameError, never read past.
package logbuffer
