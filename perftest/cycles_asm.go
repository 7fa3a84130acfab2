//go:build amd64 || arm64

package perftest

const haveCycles = true

// cycles reads the CPU's cycle counter: RDTSC on amd64, the virtual
// counter CNTVCT_EL0 on arm64.
func cycles() uint64
