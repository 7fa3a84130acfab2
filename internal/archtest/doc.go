// Package archtest enforces ibgo's architecture as docs/architecture.md states
// it: the layer diagram (which package may import which) and the kernel boundary (where
// unsafe, golang.org/x/sys/unix, syscall and cgo may appear). The rules are data,
// in rules.go; Check applies them to an import graph, and Load builds that graph
// from `go list -json` and the packages' own source files.
//
// The graph is the union over build constraints: every non-test .go file of a
// package counts, whatever its GOOS/GOARCH tags, so a darwin-only or arm64-only
// file cannot slip past a check run on linux/amd64, and the generated part of
// docs/architecture.md is the same on every machine. Test files are not part of
// the graph: tests may use unix and unsafe (leak checks, layout tests).
//
// The package's tests run the check on the module and compare the generated
// blocks in docs/architecture.md with the tree. After a change to the imports,
// regenerate the document with
//
//	go test ./internal/archtest -update
//
// Load, Check and the Render functions share no state and may be called from
// any goroutine.
package archtest
