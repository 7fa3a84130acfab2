package archtest

import "regexp"

// Package patterns below are module-relative import paths: "uverbs" is exactly
// github.com/ibgo/ibgo/uverbs, "aeron/..." is aeron and everything under it,
// and "..." is every package of the module.

// Layer is one row of the layer diagram: the packages it covers and the
// in-module packages they may import. A package belongs to the first layer
// whose Packages match it, so a narrower row (aeron/media/ib) comes before a
// wider one (aeron/...).
type Layer struct {
	Name      string
	Packages  []string // patterns of the packages in this layer
	MayImport []string // patterns of the in-module packages they may import directly
	// NeverDependsOn lists packages that must not be reached at all, directly
	// or through any chain of in-module imports.
	NeverDependsOn []string
	Why            string
}

// Restriction confines a package from outside the module (the standard
// library, x/sys, cgo) to the packages of AllowedIn.
type Restriction struct {
	Import    string   // the import path
	AllowedIn []string // patterns of the module packages that may import it
	// NamesOnly, if set, lets every other package import it too, provided
	// every name it refers to through the import matches the pattern.
	NamesOnly *regexp.Regexp
	Why       string
	Fix       string
}

// Link requires a package to import others directly from non-test code.
type Link struct {
	Package string
	Imports []string
	Why     string
}

// Rules is the complete rule set Check applies. Rules and its rows are plain
// data: safe for concurrent reads, and Check never modifies them.
type Rules struct {
	Layers       []Layer
	Restrictions []Restriction
	Links        []Link
}

// Providers are the uverbs providers: the packages that register a kernel
// driver id with uverbs.
var Providers = []string{"rxe", "mlx5"}

// verbs are the packages that know RDMA verbs; only aeron/media/ib may bring
// them into Aeron.
var verbs = []string{"uverbs", "cm/...", "rxe", "mlx5"}

// Default is ibgo's rule set: the layers and the kernel boundary of
// docs/architecture.md.
var Default = Rules{
	Layers: []Layer{
		{
			Name:      "internal",
			Packages:  []string{"internal/..."},
			MayImport: []string{"internal/..."},
			Why:       "internal/ is the ground floor: it knows nothing of verbs objects, providers, Aeron or tools",
		},
		{
			Name:      "uverbs",
			Packages:  []string{"uverbs"},
			MayImport: []string{"internal/..."},
			Why:       "uverbs is provider-neutral: providers register themselves with it, it never imports one",
		},
		{
			Name:      "providers",
			Packages:  Providers,
			MayImport: []string{"uverbs", "internal/..."},
			Why:       "a provider plugs into uverbs and knows nothing above it, nor other providers",
		},
		{
			Name:      "cm",
			Packages:  []string{"cm/..."},
			MayImport: []string{"cm/...", "uverbs", "internal/..."},
			Why:       "RDMA CM builds on uverbs objects and is provider-neutral",
		},
		{
			Name:      "perftest",
			Packages:  []string{"perftest/..."},
			MayImport: []string{"perftest/...", "cm/...", "uverbs", "internal/..."},
			Why:       "perftest is a library: the program that uses it (cmd/ibgo, hwtest) chooses the providers it links",
		},
		{
			Name:      "aeron/media/ib",
			Packages:  []string{"aeron/media/ib/..."},
			MayImport: []string{"aeron/...", "cm/...", "uverbs", "internal/..."},
			Why:       "the one place where Aeron meets verbs; provider-neutral like perftest",
		},
		{
			Name:           "aeron",
			Packages:       []string{"aeron/..."},
			MayImport:      []string{"aeron/...", "internal/..."},
			NeverDependsOn: verbs,
			Why:            "Aeron knows nothing of verbs (and builds on every OS); the driver reaches its media through the binding interface, and the program links aeron/media/ib",
		},
		{
			Name:      "cmd",
			Packages:  []string{"cmd/..."},
			MayImport: []string{"cmd/...", "aeron/...", "perftest/...", "cm/...", "uverbs", "rxe", "mlx5", "internal/..."},
			Why:       "programs sit on top and may use every library; nothing imports a program",
		},
		{
			Name:      "deploy",
			Packages:  []string{"deploy/..."},
			MayImport: []string{"deploy/...", "internal/..."},
			Why:       "release and deployment tooling (image packer, manifests) builds artefacts and links no verbs or Aeron code; nothing imports it",
		},
		{
			Name:      "hwtest",
			Packages:  []string{"hwtest/..."},
			MayImport: []string{"hwtest/...", "aeron/...", "perftest/...", "cm/...", "uverbs", "rxe", "mlx5", "internal/..."},
			Why:       "the conformance suite and VM harness test everything; nothing imports them",
		},
	},
	Restrictions: []Restriction{
		{
			Import:    "unsafe",
			AllowedIn: []string{"internal/sys", "internal/abi", "internal/mmio", "internal/shm", "rxe", "mlx5"},
			Why:       "pointer conversions stay at the kernel boundary, the uapi layouts, shared-memory atomics and the providers' mapped rings",
			Fix:       "build the command or struct through internal/abi and internal/sys's typed helpers (add one there if it is missing) instead of converting pointers here",
		},
		{
			Import:    "golang.org/x/sys/unix",
			AllowedIn: []string{"internal/sys", "internal/mmio"},
			Why:       "only internal/sys (and internal/mmio) make system calls or map memory",
			Fix:       "call internal/sys (add the wrapper there if it is missing); for an errno value use syscall's constant (syscall.EINVAL is unix.EINVAL: unix.Errno is syscall.Errno)",
		},
		{
			Import:    "syscall",
			AllowedIn: []string{"internal/sys", "internal/mmio"},
			NamesOnly: regexp.MustCompile(`^([A-Z][A-Z0-9_]*|Signal|Errno|Conn|RawConn)$`),
			Why:       "a system call needs one of syscall's functions; its constants (signal numbers, errno values, flags), the Signal and Errno types, and Conn/RawConn (to hand a net.Conn's descriptor to internal/sys) are only names",
			Fix:       "outside internal/sys use syscall only for constants and the Signal, Errno, Conn and RawConn types (syscall.SIGTERM, syscall.EINVAL, syscall.MAP_SHARED); the call itself (read, poll, setsockopt, mmap, RawConn.Control's body) goes in internal/sys (add the wrapper there if it is missing)",
		},
		{
			Import: "C",
			Why:    "no cgo: one static binary per architecture (the race detector's cgo is the toolchain's, not ours)",
			Fix:    "write it in Go (with Go assembly in internal/mmio if it needs an instruction Go lacks)",
		},
	},
	Links: []Link{
		{Package: "cmd/ibgo", Imports: Providers, Why: "the binary opens whatever device the host has"},
		{Package: "hwtest", Imports: Providers, Why: "the conformance suite runs on whatever device the host has; without the import it says \"no provider linked\""},
	},
}
