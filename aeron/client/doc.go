// Package client is a Go client of any Aeron media driver (ibgo's or
// Aeron's own): it talks to the driver through the CnC file (commands on
// the to-driver ring buffer, responses on the broadcast buffer) and reads
// and writes the log buffers the driver creates.
//
// Offer, TryClaim and Poll follow Aeron's C client (aeron_publication.c,
// aeron_exclusive_publication.c, aeron_image.c) and allocate nothing.
package client
