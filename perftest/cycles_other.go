//go:build !amd64 && !arm64

package perftest

const haveCycles = false

func cycles() uint64 { return 0 }
