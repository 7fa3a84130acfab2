package uverbs

import "testing"

type fixedOrder DataInOrderCaps

func (f fixedOrder) DataInOrder(WROpcode, DataInOrderFlags) DataInOrderCaps {
	return DataInOrderCaps(f)
}

// The combination rules of rdma-core's ibv_query_qp_data_in_order: whole
// message implies 128-byte blocks, 0/1 without RETURN_CAPS, unknown flags
// and non-x86 CPUs (unless DEVICE_ONLY) answer 0, no provider op answers 0.
func TestDataInOrderRules(t *testing.T) {
	whole, blocks := fixedOrder(DataInOrderWholeMsg), fixedOrder(DataInOrderAligned128)
	for _, c := range []struct {
		name  string
		arch  string
		q     DataInOrderQuerier
		flags DataInOrderFlags
		want  DataInOrderCaps
	}{
		{"no provider op", "amd64", nil, DataInOrderReturnCaps, 0},
		{"whole message, 0/1", "amd64", whole, 0, 1},
		{"whole message implies 128-byte blocks", "amd64", whole, DataInOrderReturnCaps, DataInOrderWholeMsg | DataInOrderAligned128},
		{"128-byte blocks only, 0/1", "amd64", blocks, 0, 0},
		{"128-byte blocks only, caps", "amd64", blocks, DataInOrderReturnCaps, DataInOrderAligned128},
		{"unknown flag", "amd64", whole, 1 << 5, 0},
		{"arm64 without DEVICE_ONLY", "arm64", whole, DataInOrderReturnCaps, 0},
		{"arm64 with DEVICE_ONLY", "arm64", whole, DataInOrderReturnCaps | DataInOrderDeviceOnly, DataInOrderWholeMsg | DataInOrderAligned128},
		{"386", "386", whole, 0, 1},
	} {
		if got := dataInOrder(c.arch, c.q, WRSend, c.flags); got != c.want {
			t.Errorf("%s: got %#x, want %#x", c.name, got, c.want)
		}
	}
}
