package driver

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A failed send's log entry names the errno, not the medium's numbering
// of datagrams and sizes: one cause is one distinct entry.
func TestSendCause(t *testing.T) {
	a := fmt.Errorf("udp: sendmmsg to 10.0.0.2:4000 (datagram 1 of 2, 1344 bytes): %w", syscall.ENETUNREACH)
	b := fmt.Errorf("udp: sendmmsg to 10.0.0.2:4000 (datagram 3 of 7, 96 bytes): %w", syscall.ENETUNREACH)
	require.Equal(t, sendCause(a).Error(), sendCause(b).Error())
	require.Equal(t, "network is unreachable", sendCause(a).Error())
	plain := errors.New("ib: frame of 9000 bytes is above the channel mtu 4096")
	require.Equal(t, plain, sendCause(plain), "an error without an errno is kept whole")
}
