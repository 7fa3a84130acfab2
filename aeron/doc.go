// Package aeron is the root of ibgo's Aeron implementation: wire protocol,
// channel URIs, log buffers, the CnC file and a media driver with aeron:udp,
// aeron:ipc and aeron:ib media.
//
// The layouts Aeron shares between processes and hosts are an ABI, and the
// subpackages reproduce them byte for byte, tested against bytes written by
// the Aeron C driver (internal/testvec):
//
//	protocol   UDP wire frames (DATA, PAD, SETUP, SM, NAK, RTTM, ERR, RSP_SETUP, RES)
//	uri        channel URIs: aeron:udp, aeron:ipc, aeron:ib
//	logbuffer  term partitions and metadata; appender, reader, scanner, rebuilder, gap scanner
//	cnc        cnc.dat: ring buffer, broadcast buffer, counters, error log; loss report
//	pcap       packet captures (pcap, pcapng) for the inspection tools
//	inspect    `ibgo aeron decode|stat|errors|loss`
//
// See docs/aeron.md.
package aeron
