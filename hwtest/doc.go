// Package hwtest is the provider-agnostic conformance suite. Its tests run in
// the soft-RoCE VM (hwtest/vm) and on real hardware; on a machine without an
// RDMA device they skip and say why (or fail, with REQUIRE_VM=1).
package hwtest
