package mlx5

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

func init() { uverbs.RegisterProvider(provider{}) }

type provider struct{}

func (provider) Name() string     { return "mlx5" }
func (provider) DriverID() uint32 { return abi.RDMA_DRIVER_MLX5 }

func (provider) NewContext(d *uverbs.Device) (uverbs.ProviderContext, error) {
	return &Context{}, nil
}

// Context is mlx5's per-context state: what the kernel said in the
// alloc_ucontext response (UAR layout, CQE version, limits).
type Context struct {
	Resp abi.Mlx5AllocUcontextResp
}

// Defaults of rdma-core providers/mlx5/mlx5.c: mlx5_alloc_context.
const (
	defTotalBfregs  = 16 // MLX5_DEF_TOT_UUARS
	defLowLatBfregs = 4
)

// ContextRequest mirrors rdma-core providers/mlx5/mlx5.c: mlx5_init_context
// without DEVX: 16 blue-flame registers, 4 low-latency, CQE version 1, 4K UAR
// pages and dynamic UARs.
func (c *Context) ContextRequest() ([]byte, int) {
	req := abi.Mlx5AllocUcontextReqV2{
		TotalNumBfregs:      defTotalBfregs,
		NumLowLatencyBfregs: defLowLatBfregs,
		MaxCQEVersion:       1,
		LibCaps:             abi.MLX5_LIB_CAP_4K_UAR | abi.MLX5_LIB_CAP_DYN_UAR,
	}
	b := make([]byte, unsafe.Sizeof(req))
	*(*abi.Mlx5AllocUcontextReqV2)(unsafe.Pointer(&b[0])) = req
	return b, int(unsafe.Sizeof(abi.Mlx5AllocUcontextResp{}))
}

// ContextResponse keeps the kernel's answer.
func (c *Context) ContextResponse(out []byte) error {
	if len(out) < int(unsafe.Sizeof(c.Resp)) {
		return errors.New("mlx5: short alloc_ucontext response")
	}
	c.Resp = *(*abi.Mlx5AllocUcontextResp)(unsafe.Pointer(&out[0]))
	return nil
}

// FormatFWVer mirrors rdma-core providers/mlx5/verbs.c: mlx5_query_device_ex.
func (c *Context) FormatFWVer(raw uint64) string {
	return fmt.Sprintf("%d.%d.%04d", raw>>32&0xffff, raw>>16&0xffff, raw&0xffff)
}

func (c *Context) Close() error { return nil }

// errNoDatapath: the mlx5 datapath (WQE/CQE rings in user memory, UAR and
// BlueFlame doorbells) needs ConnectX hardware to develop and test against,
// and is not implemented yet. Contexts open and query fine.
var errNoDatapath = fmt.Errorf("%w: the mlx5 datapath (CQ, QP, SRQ, AH) is not implemented yet", uverbs.ErrNotSupported)

func (c *Context) NewCQ(*uverbs.CQInitAttr) (uverbs.CQDriver, error)    { return nil, errNoDatapath }
func (c *Context) NewQP(*uverbs.QPInitAttr) (uverbs.QPDriver, error)    { return nil, errNoDatapath }
func (c *Context) NewSRQ(*uverbs.SRQInitAttr) (uverbs.SRQDriver, error) { return nil, errNoDatapath }
func (c *Context) NewAH(*uverbs.AHAttr) (uverbs.AHDriver, error)        { return nil, errNoDatapath }
