// Package pcap reads packet captures, classic libpcap files and pcapng, and
// extracts UDP datagrams from them (Ethernet with VLAN tags, Linux cooked
// SLL/SLL2, BSD loopback, raw IP; IPv4 and IPv6, with IP fragment
// reassembly). It exists so that `ibgo aeron decode` can read what tcpdump
// and Wireshark write without cgo or libpcap.
//
// Every malformed record is an *Error naming the packet number and the file
// offset; the reader never reads beyond the bytes it was given and caps the
// size of a record so that a corrupt length cannot make it allocate without
// bound.
package pcap
