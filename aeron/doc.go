// Package aeron is the root of ibgo's Aeron implementation: wire protocol,
// channel URIs, log buffers, the CnC file and a media driver with aeron:udp,
// aeron:ipc and aeron:ib media. See the subpackages.
package aeron
