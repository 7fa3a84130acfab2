package abi

// The registry of every hand-written uapi struct and checked constant. Both the
// C-header test (layout_test.go) and the kernel BTF test (btf_vm_test.go) walk it.

type layout struct {
	c      string // C struct tag, without "struct"
	header string // header that defines it
	goType any    // zero value of the Go mirror
}

var layouts = []layout{
	{"ib_uverbs_ioctl_hdr", "rdma/rdma_user_ioctl_cmds.h", IoctlHdr{}},
	{"ib_uverbs_attr", "rdma/rdma_user_ioctl_cmds.h", Attr{}},
	{"ib_uverbs_cmd_hdr", "rdma/ib_user_verbs.h", CmdHdr{}},
	{"ib_uverbs_ex_cmd_hdr", "rdma/ib_user_verbs.h", ExCmdHdr{}},
	{"ib_uverbs_get_context", "rdma/ib_user_verbs.h", GetContext{}},
	{"ib_uverbs_get_context_resp", "rdma/ib_user_verbs.h", GetContextResp{}},
	{"ib_uverbs_query_device", "rdma/ib_user_verbs.h", QueryDevice{}},
	{"ib_uverbs_query_device_resp", "rdma/ib_user_verbs.h", QueryDeviceResp{}},
	{"ib_uverbs_ex_query_device", "rdma/ib_user_verbs.h", ExQueryDevice{}},
	{"ib_uverbs_odp_caps", "rdma/ib_user_verbs.h", ODPCaps{}},
	{"ib_uverbs_rss_caps", "rdma/ib_user_verbs.h", RSSCaps{}},
	{"ib_uverbs_tm_caps", "rdma/ib_user_verbs.h", TMCaps{}},
	{"ib_uverbs_cq_moderation_caps", "rdma/ib_user_verbs.h", CQModerationCaps{}},
	{"ib_uverbs_ex_query_device_resp", "rdma/ib_user_verbs.h", ExQueryDeviceResp{}},
	{"ib_uverbs_query_port", "rdma/ib_user_verbs.h", QueryPort{}},
	{"ib_uverbs_query_port_resp", "rdma/ib_user_verbs.h", QueryPortResp{}},
	{"ib_uverbs_query_port_resp_ex", "rdma/ib_user_ioctl_verbs.h", QueryPortRespEx{}},
	{"ib_uverbs_gid_entry", "rdma/ib_user_ioctl_verbs.h", GIDEntry{}},
	{"ib_uverbs_alloc_pd", "rdma/ib_user_verbs.h", AllocPD{}},
	{"ib_uverbs_alloc_pd_resp", "rdma/ib_user_verbs.h", AllocPDResp{}},
	{"ib_uverbs_dealloc_pd", "rdma/ib_user_verbs.h", DeallocPD{}},
	{"ib_uverbs_async_event_desc", "rdma/ib_user_verbs.h", AsyncEventDesc{}},
	{"ib_uverbs_comp_event_desc", "rdma/ib_user_verbs.h", CompEventDesc{}},
	{"mlx5_ib_alloc_ucontext_req_v2", "rdma/mlx5-abi.h", Mlx5AllocUcontextReqV2{}},
	{"mlx5_ib_alloc_ucontext_resp", "rdma/mlx5-abi.h", Mlx5AllocUcontextResp{}},
}
