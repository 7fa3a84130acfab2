package cm

import (
	"testing"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestMain fails the binary when fds or kernel objects (cm_id, qp, cq, pd,
// mr, ctx counts from RDMA netlink) are left over.
func TestMain(m *testing.M) { testutil.Main(m) }
