package ib

import (
	"testing"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestMain fails the binary when fds or kernel RDMA objects (cm ids, QPs,
// CQs, MRs, AHs) are left over: every transport's Close must release them.
func TestMain(m *testing.M) { testutil.Main(m) }
