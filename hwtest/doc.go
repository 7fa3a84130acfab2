// Package hwtest is the provider-agnostic conformance suite. Its tests run in
// the soft-RoCE VM (hwtest/vm) and on real hardware; on a machine without an
// RDMA device they skip and say why (or fail, with REQUIRE_VM=1).
//
// The package links every provider (providers.go), so the same test binary
// opens rxe0 in the VM and a ConnectX device on a hardware host.
package hwtest
