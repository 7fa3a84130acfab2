package rxe

import (
	"fmt"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

func init() { uverbs.RegisterProvider(provider{}) }

type provider struct{}

func (provider) Name() string     { return "rxe" }
func (provider) DriverID() uint32 { return abi.RDMA_DRIVER_RXE }

func (provider) NewContext(d *uverbs.Device) (uverbs.ProviderContext, error) {
	return &context{}, nil
}

// context is rxe's per-context state. rxe's GET_CONTEXT carries no driver data.
type context struct{}

func (*context) ContextRequest() ([]byte, int)    { return nil, 0 }
func (*context) ContextResponse(out []byte) error { return nil }

// FormatFWVer mirrors rdma-core providers/rxe/rxe.c: rxe_query_device.
func (*context) FormatFWVer(raw uint64) string {
	return fmt.Sprintf("%d.%d.%d", raw>>32&0xffff, raw>>16&0xffff, raw&0xffff)
}

func (*context) Close() error { return nil }

// MemoryWindows: rxe binds and invalidates windows from the send queue
// (kernel rxe_mw.c), so uverbs.PD.AllocMW may allocate them.
func (*context) MemoryWindows() bool { return true }
