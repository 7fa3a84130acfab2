package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/uverbs"
)

func init() {
	register(&cli.Command{
		Name:      "devinfo",
		Usage:     "print RDMA device and port attributes (what ibv_devinfo shows)",
		UsageText: "ibgo devinfo [-d DEV] [-i PORT] [-v] [-l]",
		Description: "Opens each RDMA device (or the one named with -d), queries the device and its ports\n" +
			"through /dev/infiniband/uverbs* and prints them in ibv_devinfo's format, tab for tab, so\n" +
			"scripts written for rdma-core's tool keep working. -l lists only the names.\n\n" +
			"Examples:\n" +
			"   ibgo devinfo -d mlx5_0 -i 1 -v\n" +
			"   ibgo devinfo -l\n" +
			"      1 HCA found:\n" +
			"              rxe0\n\n" +
			"Environment: none.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "ib-dev", Aliases: []string{"d"}, Usage: "use IB device `DEV` (default: all devices)"},
			&cli.IntFlag{Name: "ib-port", Aliases: []string{"i"}, Usage: "use port `PORT` of the device (default: all ports)"},
			&cli.BoolFlag{Name: "list", Aliases: []string{"l"}, Usage: "print only the device names"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "print all the attributes of the device(s)"},
		},
		Action: func(c *cli.Context) error {
			if c.IsSet("ib-port") && c.Int("ib-port") <= 0 {
				return fail(1, "devinfo: invalid port %d: ports are numbered from 1", c.Int("ib-port"))
			}
			return devinfo(c.App.Writer, c.String("ib-dev"), c.Int("ib-port"), c.Bool("verbose"), c.Bool("list"))
		},
	})
}

func devinfo(w io.Writer, name string, port int, verbose, list bool) error {
	devs, err := uverbs.Devices()
	if err != nil {
		return noDevices(err)
	}
	if list {
		s := "s"
		if len(devs) == 1 {
			s = ""
		}
		fmt.Fprintf(w, "%d HCA%s found:\n", len(devs), s)
		for _, d := range devs {
			fmt.Fprintf(w, "\t%s\n", d.Name)
		}
		fmt.Fprintln(w)
		return nil
	}
	if name != "" {
		var names []string
		var found *uverbs.Device
		for _, d := range devs {
			names = append(names, d.Name)
			if d.Name == name {
				found = d
			}
		}
		if found == nil {
			return fail(1, "IB device '%s' wasn't found (devices: %s)", name, strings.Join(names, ", "))
		}
		devs = []*uverbs.Device{found}
	}
	for _, d := range devs {
		if err := printDevice(w, d, port, verbose); err != nil {
			return err
		}
	}
	return nil
}

// printDevice mirrors the output of rdma-core libibverbs/examples/devinfo.c:
// print_hca_cap (rdma-core 44, Debian bookworm), tab for tab.
func printDevice(w io.Writer, d *uverbs.Device, port int, verbose bool) error {
	ctx, err := d.Open()
	if err != nil {
		return fail(1, "failed to open device %s: %v", d.Name, err)
	}
	defer ctx.Close()
	a, err := ctx.QueryDevice()
	if err != nil {
		return fail(1, "failed to query device %s: %v", d.Name, err)
	}
	if port > int(a.PhysPortCnt) {
		return fail(1, "invalid port %d requested for device %s (it has %d)", port, d.Name, a.PhysPortCnt)
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("hca_id:\t%s\n", d.Name)
	p("\ttransport:\t\t\t%s (%d)\n", d.Transport(), d.Transport())
	if a.FWVer != "" {
		p("\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	p("\tnode_guid:\t\t\t%s\n", a.NodeGUID)
	p("\tsys_image_guid:\t\t\t%s\n", a.SysImageGUID)
	p("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p("\tvendor_part_id:\t\t\t%d\n", a.VendorPartID)
	p("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	if d.BoardID != "" {
		p("\tboard_id:\t\t\t%s\n", d.BoardID)
	}
	p("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if verbose {
		printDeviceVerbose(p, a, ctx.NumCompVectors())
	}
	for pn := 1; pn <= int(a.PhysPortCnt); pn++ {
		if port != 0 && pn != port {
			continue
		}
		pa, err := ctx.QueryPort(uint8(pn))
		if err != nil {
			return fail(1, "failed to query port %d of %s: %v", pn, d.Name, err)
		}
		p("\t\tport:\t%d\n", pn)
		p("\t\t\tstate:\t\t\t%s (%d)\n", pa.State, pa.State)
		p("\t\t\tmax_mtu:\t\t%s (%d)\n", pa.MaxMTU, pa.MaxMTU)
		p("\t\t\tactive_mtu:\t\t%s (%d)\n", pa.ActiveMTU, pa.ActiveMTU)
		p("\t\t\tsm_lid:\t\t\t%d\n", pa.SMLID)
		p("\t\t\tport_lid:\t\t%d\n", pa.LID)
		p("\t\t\tport_lmc:\t\t0x%02x\n", pa.LMC)
		p("\t\t\tlink_layer:\t\t%s\n", pa.LinkLayer)
		if verbose {
			p("\t\t\tmax_msg_sz:\t\t0x%x\n", pa.MaxMsgSz)
			p("\t\t\tport_cap_flags:\t\t0x%08x\n", pa.PortCapFlags)
			p("\t\t\tport_cap_flags2:\t0x%04x\n", pa.PortCapFlags2)
			p("\t\t\tmax_vl_num:\t\t%s (%d)\n", vlStr(pa.MaxVLNum), pa.MaxVLNum)
			p("\t\t\tbad_pkey_cntr:\t\t0x%x\n", pa.BadPkeyCntr)
			p("\t\t\tqkey_viol_cntr:\t\t0x%x\n", pa.QkeyViolCntr)
			p("\t\t\tsm_sl:\t\t\t%d\n", pa.SMSL)
			p("\t\t\tpkey_tbl_len:\t\t%d\n", pa.PkeyTblLen)
			p("\t\t\tgid_tbl_len:\t\t%d\n", pa.GIDTblLen)
			p("\t\t\tsubnet_timeout:\t\t%d\n", pa.SubnetTimeout)
			p("\t\t\tinit_type_reply:\t%d\n", pa.InitTypeReply)
			p("\t\t\tactive_width:\t\t%sX (%d)\n", widthStr(pa.ActiveWidth), pa.ActiveWidth)
			speed := uint32(pa.ActiveSpeed)
			if pa.ActiveSpeedEx != 0 {
				speed = pa.ActiveSpeedEx
			}
			p("\t\t\tactive_speed:\t\t%s (%d)\n", speedStr(speed), speed)
			if d.Transport() == uverbs.TransportIB {
				p("\t\t\tphys_state:\t\t%s (%d)\n", physStateStr(pa.PhysState), pa.PhysState)
			}
			gids, err := ctx.QueryGIDTable()
			if err != nil {
				return fail(1, "failed to query the GID table of %s: %v", d.Name, err)
			}
			for _, g := range gids {
				if int(g.Port) != pn || g.GID.IsZero() {
					continue
				}
				suffix := ""
				v2 := g.Type == uverbs.GIDTypeRoCEv2
				if pa.LinkLayer == uverbs.LinkLayerEthernet {
					if v2 {
						suffix = ", RoCE v2"
					} else {
						suffix = ", RoCE v1"
					}
				}
				if v2 {
					p("\t\t\tGID[%3d]:\t\t%s%s\n", g.Index, g.GID, suffix)
				} else {
					p("\t\t\tGID[%3d]:\t\t%s%s\n", g.Index, g.GID.Raw(), suffix)
				}
			}
		}
		p("\n")
	}
	return nil
}

type printer func(format string, args ...any)

var deviceCapNames = []struct {
	bit  uint32
	name string
}{
	{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"}, {1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"}, {1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"}, {1 << 9, "INIT_TYPE"}, {1 << 10, "PORT_ACTIVE_EVENT"},
	{1 << 11, "SYS_IMAGE_GUID"}, {1 << 12, "RC_RNR_NAK_GEN"}, {1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"},
	{1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"}, {1 << 20, "XRC"}, {1 << 21, "MEM_MGT_EXTENSIONS"},
	{1 << 23, "MEM_WINDOW_TYPE_2A"}, {1 << 24, "MEM_WINDOW_TYPE_2B"}, {1 << 25, "RC_IP_CSUM"},
	{1 << 26, "RAW_IP_CSUM"}, {1 << 29, "MANAGED_FLOW_STEERING"},
}

var odpTransportNames = []struct {
	bit  uint32
	name string
}{
	{1 << 0, "SUPPORT_SEND"}, {1 << 1, "SUPPORT_RECV"}, {1 << 2, "SUPPORT_WRITE"}, {1 << 3, "SUPPORT_READ"},
	{1 << 4, "SUPPORT_ATOMIC"}, {1 << 5, "SUPPORT_SRQ"},
}

const flagIndent = "\t\t\t\t\t"

func printDeviceVerbose(p printer, a *uverbs.DeviceAttr, numCompVectors int) {
	p("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	p("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	p("\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
	p("\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
	p("\tdevice_cap_flags:\t\t0x%08x\n", a.DeviceCapFlags)
	known := uint32(0)
	for _, f := range deviceCapNames {
		known |= f.bit
		if a.DeviceCapFlags&f.bit != 0 {
			p(flagIndent+"%s\n", f.name)
		}
	}
	if u := a.DeviceCapFlags &^ known; u != 0 {
		p(flagIndent+"Unknown flags: 0x%X\n", u)
	}
	p("\tmax_sge:\t\t\t%d\n", a.MaxSGE)
	p("\tmax_sge_rd:\t\t\t%d\n", a.MaxSGERd)
	p("\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
	p("\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
	p("\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
	p("\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
	p("\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRdAtom)
	p("\tmax_ee_rd_atom:\t\t\t%d\n", a.MaxEERdAtom)
	p("\tmax_res_rd_atom:\t\t%d\n", a.MaxResRdAtom)
	p("\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRdAtom)
	p("\tmax_ee_init_rd_atom:\t\t%d\n", a.MaxEEInitRdAtom)
	p("\tatomic_cap:\t\t\t%s (%d)\n", a.AtomicCap, a.AtomicCap)
	p("\tmax_ee:\t\t\t\t%d\n", a.MaxEE)
	p("\tmax_rdd:\t\t\t%d\n", a.MaxRDD)
	p("\tmax_mw:\t\t\t\t%d\n", a.MaxMW)
	p("\tmax_raw_ipv6_qp:\t\t%d\n", a.MaxRawIPv6QP)
	p("\tmax_raw_ethy_qp:\t\t%d\n", a.MaxRawEthyQP)
	p("\tmax_mcast_grp:\t\t\t%d\n", a.MaxMcastGrp)
	p("\tmax_mcast_qp_attach:\t\t%d\n", a.MaxMcastQPAttach)
	p("\tmax_total_mcast_qp_attach:\t%d\n", a.MaxTotalMcastQPAttach)
	p("\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
	p("\tmax_fmr:\t\t\t%d\n", a.MaxFMR)
	if a.MaxFMR != 0 {
		p("\tmax_map_per_fmr:\t\t%d\n", a.MaxMapPerFMR)
	}
	p("\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		p("\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
		p("\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
	}
	p("\tmax_pkeys:\t\t\t%d\n", a.MaxPkeys)
	p("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	p("\tgeneral_odp_caps:\n")
	if a.ODPGeneralCaps&1 != 0 {
		p(flagIndent + "ODP_SUPPORT\n")
	}
	if a.ODPGeneralCaps&2 != 0 {
		p(flagIndent + "ODP_SUPPORT_IMPLICIT\n")
	}
	if u := a.ODPGeneralCaps &^ 3; u != 0 {
		p(flagIndent+"Unknown flags: 0x%X\n", u)
	}
	for _, t := range []struct {
		name string
		caps uint32
	}{{"rc", a.RCODPCaps}, {"uc", a.UCODPCaps}, {"ud", a.UDODPCaps}, {"xrc", a.XRCODPCaps}} {
		p("\t%s_odp_caps:\n", t.name)
		if t.caps == 0 {
			p(flagIndent + "NO SUPPORT\n")
			continue
		}
		known := uint32(0)
		for _, f := range odpTransportNames {
			known |= f.bit
			if t.caps&f.bit != 0 {
				p(flagIndent+"%s\n", f.name)
			}
		}
		if u := t.caps &^ known; u != 0 {
			p(flagIndent+"Unknown flags: 0x%X\n", u)
		}
	}
	if a.CompletionTimestampMask != 0 {
		p("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.CompletionTimestampMask)
	} else {
		p("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		p("\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		p("\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		p("\traw packet caps:\n")
		for _, f := range []struct {
			bit  uint32
			name string
		}{{1, "C-VLAN stripping offload"}, {2, "Scatter FCS offload"}, {4, "IP csum offload"}, {8, "Delay drop"}} {
			if a.RawPacketCaps&f.bit != 0 {
				p(flagIndent+"%s\n", f.name)
			}
		}
	}
	p("\tdevice_cap_flags_ex:\t\t0x%X\n", a.DeviceCapFlagsEx)
	ex := a.DeviceCapFlagsEx & 0xffffffff00000000
	if ex&(1<<34) != 0 {
		p(flagIndent + "RAW_SCATTER_FCS\n")
	}
	if ex&(1<<36) != 0 {
		p(flagIndent + "PCI_WRITE_END_PADDING\n")
	}
	if u := ex &^ (1<<34 | 1<<36); u != 0 {
		p(flagIndent+"Unknown flags: 0x%X\n", u)
	}
	// TSO and packet pacing capabilities come from provider driver data
	// (mlx5); the core kernel response has none.
	p("\ttso_caps:\n")
	p("\t\tmax_tso:\t\t\t0\n")
	p("\trss_caps:\n")
	p("\t\tmax_rwq_indirection_tables:\t\t\t%d\n", a.MaxRWQIndirectionTables)
	p("\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", a.MaxRWQIndirectionTableSize)
	p("\t\trx_hash_function:\t\t\t\t0x0\n")
	p("\t\trx_hash_fields_mask:\t\t\t\t0x0\n")
	if a.RSSSupportedQPTs != 0 {
		p("\t\tsupported_qp:\n")
		if a.RSSSupportedQPTs&(1<<8) != 0 {
			p(flagIndent + "SUPPORT_RAW_PACKET\n")
		}
		if a.RSSSupportedQPTs&(1<<4) != 0 {
			p(flagIndent + "SUPPORT_UD\n")
		}
		if u := a.RSSSupportedQPTs &^ (1<<8 | 1<<4); u != 0 {
			p(flagIndent+"Unknown flags: 0x%X\n", u)
		}
	}
	p("\tmax_wq_type_rq:\t\t\t%d\n", a.MaxWQTypeRQ)
	p("\tpacket_pacing_caps:\n")
	p("\t\tqp_rate_limit_min:\t0kbps\n")
	p("\t\tqp_rate_limit_max:\t0kbps\n")
	if a.TMMaxNumTags != 0 {
		p("\tmax_rndv_hdr_size:\t\t%d\n", a.TMMaxRndvHdrSize)
		p("\tmax_num_tags:\t\t\t%d\n", a.TMMaxNumTags)
		p("\tmax_ops:\t\t\t%d\n", a.TMMaxOps)
		p("\tmax_sge:\t\t\t%d\n", a.TMMaxSGE)
		p("\tflags:\n")
		if a.TMFlags&1 != 0 {
			p(flagIndent + "IBV_TM_CAP_RC\n")
		}
	} else {
		p("\ttag matching not supported\n")
	}
	if a.MaxCQModerationCount != 0 && a.MaxCQModerationPeriod != 0 {
		p("\n\tcq moderation caps:\n")
		p("\t\tmax_cq_count:\t%d\n", a.MaxCQModerationCount)
		p("\t\tmax_cq_period:\t%d us\n\n", a.MaxCQModerationPeriod)
	}
	if a.MaxDMSize != 0 {
		p("\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	p("\tnum_comp_vectors:\t\t%d\n", numCompVectors)
}

func widthStr(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedStr(s uint32) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	case 0x100:
		return "200.0 Gbps"
	}
	return "invalid speed"
}

func vlStr(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}

func physStateStr(s uint8) string {
	switch s {
	case 1:
		return "SLEEP"
	case 2:
		return "POLLING"
	case 3:
		return "DISABLED"
	case 4:
		return "PORT_CONFIGURATION TRAINNING"
	case 5:
		return "LINK_UP"
	case 6:
		return "LINK_ERROR_RECOVERY"
	case 7:
		return "PHY TEST"
	}
	return "invalid physical state"
}
