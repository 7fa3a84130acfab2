// Package cnc implements Aeron's command-and-control file, cnc.dat, through
// which clients and the media driver talk over shared memory
// (aeron_cnc_file_descriptor.h, Java CncFileDescriptor): the 128-byte header,
// the to-driver many-to-one ring buffer, the to-clients broadcast buffer,
// counters metadata and values, and the distinct error log; and the loss
// report, loss-report.dat.
//
// These layouts are an ABI shared with Aeron's C, C++, Java and Go clients,
// so offsets, record formats and the ordering of writes follow the
// reference implementation: the ring buffer is Agrona's ManyToOneRingBuffer
// (producers in many processes claim space by compare-and-swap on the tail),
// the broadcast buffer Agrona's BroadcastTransmitter/Receiver (one writer,
// readers detect being lapped), counters Aeron's CountersManager. Every
// length read from the shared memory is checked before it is used; a
// corrupt record is an *Error with its offset, never a read out of range.
package cnc
