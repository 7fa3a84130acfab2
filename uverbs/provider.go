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
