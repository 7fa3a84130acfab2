// Package shm holds the few unsafe operations ibgo needs over shared memory:
// typed atomic loads and stores on byte slices (Aeron log buffers, the CnC
// file, counters) and memory-mapped files.
//
// Aeron's shared files are an ABI between processes: every word another
// process may read or write concurrently is accessed here with sync/atomic,
// which gives at least the acquire/release ordering the Aeron C and Java code
// relies on (Go's atomics are sequentially consistent). Keeping unsafe in this
// one package lets the aeron packages stay free of it.
//
// Offsets passed to these functions are trusted: callers validate lengths and
// alignment of anything that came from outside (a peer, a file) before they
// index with it. A bad offset here is a programmer error and panics with a
// message that names the offset, the size and the buffer length.
package shm
