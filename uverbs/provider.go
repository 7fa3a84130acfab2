package uverbs

import (
	"fmt"
	"sort"
	"sync"
)

// Provider is a device driver's user-space half (rdma-core calls these
// "providers"): it supplies the driver-specific bytes of each create command
// and, from the datapath work on, the post/poll implementation. Providers
// register themselves from an init function, by kernel driver id, like
// database/sql drivers.
type Provider interface {
	// Name is the kernel driver name ("rxe", "mlx5").
	Name() string
	// DriverID is the kernel's enum rdma_driver_id value.
	DriverID() uint32
	// NewContext is called once per opened device, before GET_CONTEXT.
	NewContext(d *Device) (ProviderContext, error)
}

// ProviderContext is a provider's per-Context state.
//
// Concurrency contract between uverbs and providers: the control-path hooks
// (ContextRequest/Response, NewCQ/QP/SRQ/AH, DriverData, Created,
// ResizeData/Resized, ModifyData/Modified, Destroy) are called with the
// Context's command lock held, one at a time per Context (NewCQ, NewQP,
// NewSRQ and NewAH run just before taking it). The datapath methods
// (CQDriver.Poll, QPDriver.PostSend/PostRecv, SRQDriver.PostRecv) are called
// with no uverbs lock, concurrently with each other and with any control-path
// hook of the same object, Destroy included: the provider serialises what
// must be (its ring locks), and a post or poll after Destroy returns
// ErrClosed. QP.PostSend may be called from several goroutines at once;
// CQ.Poll from one at a time unless the provider documents otherwise.
type ProviderContext interface {
	// ContextRequest returns the driver request for GET_CONTEXT (UHW_IN,
	// may be empty) and the size of the driver response to expect (UHW_OUT).
	ContextRequest() (in []byte, outLen int)
	// ContextResponse receives the driver response of GET_CONTEXT.
	ContextResponse(out []byte) error
	// FormatFWVer renders QUERY_DEVICE's raw firmware version the way the
	// provider's rdma-core counterpart does.
	FormatFWVer(raw uint64) string
	// Close releases provider resources (mappings) of the context.
	Close() error

	// NewCQ, NewQP, NewSRQ and NewAH return the provider's half of a new
	// object before the kernel creates it: its driver request, and the code
	// that maps its queues from the driver response and runs its datapath.
	NewCQ(attr *CQInitAttr) (CQDriver, error)
	NewQP(attr *QPInitAttr) (QPDriver, error)
	NewSRQ(attr *SRQInitAttr) (SRQDriver, error)
	NewAH(attr *AHAttr) (AHDriver, error)
}

// ContextOpener is implemented by a ProviderContext that needs the open
// Context once GET_CONTEXT has succeeded, before any object is created:
// mlx5 maps its UAR (doorbell) pages and the clock-info page through the
// command fd there (rdma-core providers/mlx5/mlx5.c: mlx5_init_context runs
// after the GET_CONTEXT command for the same reason). An error closes the
// context.
type ContextOpener interface {
	Opened(c *Context) error
}

// DriverData is the provider-specific part of a create command: the request
// bytes (UHW_IN) and the size of the response to expect (UHW_OUT).
type DriverData struct {
	In     []byte
	OutLen int
	// Refuse, when set by ResizeData or ModifyData, says the provider cannot
	// build the request (mlx5 cannot resize): the command is not sent,
	// Resized/Modified still run (with Refuse as the command's error) and
	// the caller gets Refuse, which should wrap ErrNotSupported.
	Refuse error
}

// CQDriver is a provider's completion queue.
type CQDriver interface {
	DriverData() DriverData
	// Created receives the driver response; the provider maps its ring.
	Created(cq *CQ, out []byte) error
	// Poll fills wc with up to len(wc) completions and returns how many.
	Poll(wc []WC) (int, error)
	// ResizeData and Resized bracket RESIZE_CQ. ResizeData returns the
	// driver request (or DriverData.Refuse) and takes whatever excludes the
	// provider's Poll: the
	// kernel copies pending completions into the new ring and rewrites
	// the consumer index meanwhile. Resized is ALWAYS called after
	// ResizeData, with the command's error (nil on success); the provider
	// maps the new ring only when err is nil, and always releases the
	// exclusion.
	ResizeData(cqe int) DriverData
	Resized(cq *CQ, out []byte, err error) error
	// Destroy releases the provider's resources after the kernel object is
	// gone (destroyed, or its context closed).
	Destroy() error
}

// QPDriver is a provider's queue pair.
type QPDriver interface {
	DriverData() DriverData
	Created(qp *QP, out []byte) error
	// PostSend and PostRecv post wr in order and return how many were
	// posted; on error, wr[n] is the one that failed.
	PostSend(wr []SendWR) (int, error)
	PostRecv(wr []RecvWR) (int, error)
	Destroy() error
}

// QPCapReporter is implemented by a QPDriver whose rdma-core counterpart
// reports queue sizes of its own instead of the kernel's: libmlx5 reports
// max_send_wr from its ring (create_qp: sq.max_post = wq_size/wqe_size, 21
// where 16 were asked for and the kernel echoes 16) and mlx5_query_qp
// overrides the send sizes of QUERY_QP's answer. uverbs calls CreatedCap
// after CREATE_QP succeeded (its result is QP.Cap) and QueriedCap after
// QUERY_QP (its result is QP.Query's QPAttr.Cap and QPInitAttr.Cap), with
// the Context's lock held. A driver without it reports the kernel's sizes.
type QPCapReporter interface {
	CreatedCap(kernel QPCap) QPCap
	QueriedCap(kernel QPCap) QPCap
}

// SRQCapReporter is QPCapReporter for an SRQ: libmlx5 tells the kernel a
// larger max_wr than the application may post (mlx5_create_srq's wait
// queue) and reports its own after CREATE_SRQ. CreatedCap gets the
// kernel's max_wr and max_sge and returns those SRQ.MaxWR/MaxSGE report.
type SRQCapReporter interface {
	CreatedCap(maxWR, maxSGE uint32) (uint32, uint32)
}

// SRQDriver is a provider's shared receive queue.
type SRQDriver interface {
	DriverData() DriverData
	Created(srq *SRQ, out []byte) error
	// ModifyData is the driver request for MODIFY_SRQ (rxe needs one to
	// resize; DriverData.Refuse refuses the modify without sending it);
	// scratch allocates command memory the kernel may write.
	// Modified is ALWAYS called after ModifyData, with the command's error
	// (nil when the kernel accepted it): whatever ModifyData took is
	// released there on every path.
	ModifyData(attr *SRQAttr, mask SRQAttrMask, scratch func(n int) []byte) DriverData
	Modified(srq *SRQ, attr *SRQAttr, mask SRQAttrMask, err error) error
	PostRecv(wr []RecvWR) (int, error)
	Destroy() error
}

// AHDriver is a provider's address handle.
type AHDriver interface {
	DriverData() DriverData
	Created(ah *AH, out []byte) error
}

// knownProviders names the package to import for each driver id.
var knownProviders = map[uint32]struct{ name, pkg string }{
	1:  {"mlx5", "github.com/ibgo/ibgo/mlx5"},
	14: {"rxe", "github.com/ibgo/ibgo/rxe"},
}

var (
	providersMu sync.RWMutex
	providers   = map[uint32]Provider{}
)

// RegisterProvider makes a provider available. Registering two providers for
// one driver id is a programming error and panics.
func RegisterProvider(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	if _, dup := providers[p.DriverID()]; dup {
		panic(fmt.Sprintf("uverbs: provider for driver id %d registered twice", p.DriverID()))
	}
	providers[p.DriverID()] = p
}

// Providers lists the registered providers' names.
func Providers() []string {
	providersMu.RLock()
	defer providersMu.RUnlock()
	var names []string
	for _, p := range providers {
		names = append(names, p.Name())
	}
	sort.Strings(names)
	return names
}

func providerFor(d *Device) (Provider, error) {
	providersMu.RLock()
	p := providers[d.DriverID]
	providersMu.RUnlock()
	if p != nil {
		return p, nil
	}
	if k, ok := knownProviders[d.DriverID]; ok {
		return nil, fmt.Errorf("%w: no provider linked for %s (driver id %d): import _ %q",
			ErrNotSupported, k.name, d.DriverID, k.pkg)
	}
	return nil, fmt.Errorf("%w: device %s has driver %q (id %d), for which ibgo has no provider",
		ErrNotSupported, d.Name, d.Driver, d.DriverID)
}
