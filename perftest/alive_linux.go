package perftest

import (
	"syscall"

	"github.com/ibgo/ibgo/internal/sys"
)

func peerHungUp(rc syscall.RawConn) (bool, error) { return sys.PeerHungUp(rc) }
