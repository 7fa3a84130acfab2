package hwtest

// The suite opens whatever RDMA device the host has, so it links every
// provider: without these imports uverbs finds no provider for the device's
// kernel driver and a ConnectX host reports "no provider linked" (see
// uverbs/provider.go). internal/archtest checks that these imports stay here.
import (
	_ "github.com/ibgo/ibgo/mlx5"
	_ "github.com/ibgo/ibgo/rxe"
)
