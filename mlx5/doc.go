// Package mlx5 is the NVIDIA ConnectX (mlx5_ib) provider: it registers itself
// with uverbs for kernel driver id RDMA_DRIVER_MLX5 (1) and supplies the
// alloc_ucontext request (struct mlx5_ib_alloc_ucontext_req_v2). Its direct
// datapath (UAR/BlueFlame doorbells, WQE and CQE rings) runs on hardware only.
package mlx5
