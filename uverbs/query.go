package uverbs

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// DeviceAttr is what QUERY_DEVICE (extended form where the kernel has it)
// reports: the fields of struct ibv_device_attr_ex that come from the kernel.
type DeviceAttr struct {
	FWVer                 string // formatted by the provider, as rdma-core does
	RawFWVer              uint64
	NodeGUID              GUID
	SysImageGUID          GUID
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             AtomicCap
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPkeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8

	// Extended attributes (zero when the kernel lacks EX_QUERY_DEVICE or
	// its response is shorter).
	Extended                   bool
	ODPGeneralCaps             uint64
	RCODPCaps, UCODPCaps       uint32
	UDODPCaps, XRCODPCaps      uint32
	CompletionTimestampMask    uint64
	HCACoreClock               uint64 // kHz
	DeviceCapFlagsEx           uint64
	RSSSupportedQPTs           uint32
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	MaxWQTypeRQ                uint32
	RawPacketCaps              uint32
	TMMaxRndvHdrSize           uint32
	TMMaxNumTags               uint32
	TMFlags                    uint32
	TMMaxOps                   uint32
	TMMaxSGE                   uint32
	MaxCQModerationCount       uint16
	MaxCQModerationPeriod      uint16
	MaxDMSize                  uint64
}

// QueryDevice reports the device's attributes. It uses EX_QUERY_DEVICE and
// falls back to QUERY_DEVICE when the kernel lacks it, as rdma-core's
// ibv_cmd_query_device_any does.
func (c *Context) QueryDevice() (*DeviceAttr, error) {
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "query device", err)
	}
	defer c.mu.Unlock()
	exResp := c.arena.Alloc(abi.Size[abi.ExQueryDeviceResp]())
	_, exIn := alloc[abi.ExQueryDevice](c)
	w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, Extended: true, CoreIn: exIn, CoreOut: exResp}
	err := c.execWrite(w)
	var r abi.ExQueryDeviceResp
	switch e := sys.ErrnoOf(err); {
	case err == nil:
		r = *abi.As[abi.ExQueryDeviceResp](exResp)
	case e == sys.EOPNOTSUPP || e == sys.ENOSYS:
		base := c.arena.Alloc(abi.Size[abi.QueryDeviceResp]())
		_, in := alloc[abi.QueryDevice](c)
		w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_QUERY_DEVICE, CoreIn: in, CoreOut: base}
		if err := c.execWrite(w); err != nil {
			return nil, opErr(c.dev.Name, "query device", err)
		}
		r.Base = *abi.As[abi.QueryDeviceResp](base)
		r.ResponseLength = uint32(abi.Size[abi.QueryDeviceResp]())
	default:
		return nil, opErr(c.dev.Name, "query device", err)
	}
	b := r.Base
	a := &DeviceAttr{
		RawFWVer: b.FWVer, FWVer: c.prov.FormatFWVer(b.FWVer),
		NodeGUID: GUID(b.NodeGUID), SysImageGUID: GUID(b.SysImageGUID),
		MaxMRSize: b.MaxMRSize, PageSizeCap: b.PageSizeCap, VendorID: b.VendorID, VendorPartID: b.VendorPartID,
		HWVer: b.HWVer, MaxQP: b.MaxQP, MaxQPWR: b.MaxQPWR, DeviceCapFlags: b.DeviceCapFlags,
		MaxSGE: b.MaxSGE, MaxSGERd: b.MaxSGERd, MaxCQ: b.MaxCQ, MaxCQE: b.MaxCQE, MaxMR: b.MaxMR, MaxPD: b.MaxPD,
		MaxQPRdAtom: b.MaxQPRdAtom, MaxEERdAtom: b.MaxEERdAtom, MaxResRdAtom: b.MaxResRdAtom,
		MaxQPInitRdAtom: b.MaxQPInitRdAtom, MaxEEInitRdAtom: b.MaxEEInitRdAtom, AtomicCap: AtomicCap(b.AtomicCap),
		MaxEE: b.MaxEE, MaxRDD: b.MaxRDD, MaxMW: b.MaxMW, MaxRawIPv6QP: b.MaxRawIPv6QP, MaxRawEthyQP: b.MaxRawEthyQP,
		MaxMcastGrp: b.MaxMcastGrp, MaxMcastQPAttach: b.MaxMcastQPAttach, MaxTotalMcastQPAttach: b.MaxTotalMcastQPAttach,
		MaxAH: b.MaxAH, MaxFMR: b.MaxFMR, MaxMapPerFMR: b.MaxMapPerFMR, MaxSRQ: b.MaxSRQ, MaxSRQWR: b.MaxSRQWR,
		MaxSRQSGE: b.MaxSRQSGE, MaxPkeys: b.MaxPkeys, LocalCAAckDelay: b.LocalCAAckDelay, PhysPortCnt: b.PhysPortCnt,
	}
	// Copy each extended field only if the kernel's response covers it
	// (rdma-core cmd_device.c: CAN_COPY).
	end := &abi.ExQueryDeviceRespEnd
	has := func(end uint32) bool { return r.ResponseLength >= end }
	a.Extended = has(end.ODPCapsStart)
	if has(end.ODPCaps) {
		a.ODPGeneralCaps = r.ODPCaps.GeneralCaps
		a.RCODPCaps, a.UCODPCaps, a.UDODPCaps = r.ODPCaps.RCODPCaps, r.ODPCaps.UCODPCaps, r.ODPCaps.UDODPCaps
	}
	if has(end.TimestampMask) {
		a.CompletionTimestampMask = r.TimestampMask
	}
	if has(end.HCACoreClock) {
		a.HCACoreClock = r.HCACoreClock
	}
	if has(end.DeviceCapFlagsEx) {
		a.DeviceCapFlagsEx = r.DeviceCapFlagsEx
	}
	if has(end.RSSCaps) {
		a.RSSSupportedQPTs = r.RSSCaps.SupportedQPTs
		a.MaxRWQIndirectionTables = r.RSSCaps.MaxRWQIndirectionTables
		a.MaxRWQIndirectionTableSize = r.RSSCaps.MaxRWQIndirectionTableSize
	}
	if has(end.MaxWQTypeRQ) {
		a.MaxWQTypeRQ = r.MaxWQTypeRQ
	}
	if has(end.RawPacketCaps) {
		a.RawPacketCaps = r.RawPacketCaps
	}
	if has(end.TMCaps) {
		t := r.TMCaps
		a.TMMaxRndvHdrSize, a.TMMaxNumTags, a.TMFlags, a.TMMaxOps, a.TMMaxSGE = t.MaxRndvHdrSize, t.MaxNumTags, t.Flags, t.MaxOps, t.MaxSGE
	}
	if has(end.CQModerationCaps) {
		a.MaxCQModerationCount = r.CQModerationCaps.MaxCQModerationCount
		a.MaxCQModerationPeriod = r.CQModerationCaps.MaxCQModerationPeriod
	}
	if has(end.MaxDMSize) {
		a.MaxDMSize = r.MaxDMSize
	}
	if has(end.XRCODPCaps) {
		a.XRCODPCaps = r.XRCODPCaps
	}
	return a, nil
}

// PortAttr is what QUERY_PORT reports (struct ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	ActiveSpeedEx uint32 // kernels >= ~6.6 (XDR); 0 otherwise
	PhysState     uint8
	LinkLayer     LinkLayer
	Flags         uint8
	PortCapFlags2 uint16
}

// QueryPort reports the attributes of port (1-based).
func (c *Context) QueryPort(port uint8) (*PortAttr, error) {
	op := "query port " + strconv.Itoa(int(port))
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	var r abi.QueryPortRespEx
	ran, err := c.tryIoctl(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT, func() error {
		cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT, c.dev.DriverID)
		cmd.Const(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port))
		out := cmd.PtrOut(abi.UVERBS_ATTR_QUERY_PORT_RESP, abi.Size[abi.QueryPortRespEx]())
		if err := cmd.Exec(c.fd); err != nil {
			return err
		}
		r = *abi.As[abi.QueryPortRespEx](out)
		return nil
	})
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	if !ran {
		q, in := alloc[abi.QueryPort](c)
		q.PortNum = port
		out := c.arena.Alloc(abi.Size[abi.QueryPortResp]())
		if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_QUERY_PORT, CoreIn: in, CoreOut: out}); err != nil {
			return nil, opErr(c.dev.Name, op, err)
		}
		r.LegacyResp = *abi.As[abi.QueryPortResp](out)
	}
	l := r.LegacyResp
	return &PortAttr{
		State: PortState(l.State), MaxMTU: MTU(l.MaxMTU), ActiveMTU: MTU(l.ActiveMTU), GIDTblLen: int(l.GIDTblLen),
		PortCapFlags: l.PortCapFlags, MaxMsgSz: l.MaxMsgSz, BadPkeyCntr: l.BadPkeyCntr, QkeyViolCntr: l.QkeyViolCntr,
		PkeyTblLen: l.PkeyTblLen, LID: l.LID, SMLID: l.SMLID, LMC: l.LMC, MaxVLNum: l.MaxVLNum, SMSL: l.SMSL,
		SubnetTimeout: l.SubnetTimeout, InitTypeReply: l.InitTypeReply, ActiveWidth: l.ActiveWidth,
		ActiveSpeed: l.ActiveSpeed, ActiveSpeedEx: r.ActiveSpeedEx, PhysState: l.PhysState,
		LinkLayer: LinkLayer(l.LinkLayer), Flags: l.Flags, PortCapFlags2: r.PortCapFlags2,
	}, nil
}

// GIDEntry is one valid entry of a port's GID table.
type GIDEntry struct {
	GID           GID
	Index         uint32
	Port          uint32
	Type          GIDType
	NetdevIfindex uint32
	Netdev        string // name of NetdevIfindex in this network namespace, if any
}

// QueryGIDTable returns every valid GID of every port. It uses the
// QUERY_GID_TABLE ioctl (kernel >= 5.10) and reads sysfs on older kernels.
func (c *Context) QueryGIDTable() ([]GIDEntry, error) {
	total := 0
	for _, p := range c.dev.Ports {
		pa, err := c.QueryPort(uint8(p.Port))
		if err != nil {
			return nil, err
		}
		total += pa.GIDTblLen
	}
	if total == 0 {
		total = 1
	}
	out := make([]GIDEntry, total)
	n, err := c.QueryGIDTableInto(out)
	if err != nil {
		return nil, err
	}
	return out[:n:n], nil
}

// gidTableSysfs reads the GID table from sysfs (kernels before 5.10).
func (c *Context) gidTableSysfs() ([]GIDEntry, error) {
	var out []GIDEntry
	for _, p := range c.dev.Ports {
		dir := filepath.Join(c.dev.SysfsPath, "ports", strconv.Itoa(int(p.Port)))
		ents, err := os.ReadDir(filepath.Join(dir, "gids"))
		if err != nil {
			return nil, opErr(c.dev.Name, "query gid table", err)
		}
		for _, e := range ents {
			i, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			g, err := ParseGID(readTrim(filepath.Join(dir, "gids", e.Name())))
			if err != nil || g.IsZero() {
				continue
			}
			ge := GIDEntry{GID: g, Index: uint32(i), Port: p.Port}
			switch readTrim(filepath.Join(dir, "gid_attrs/types", e.Name())) {
			case "RoCE v2":
				ge.Type = GIDTypeRoCEv2
			case "IB/RoCE v1":
				if p.LinkLayer == "Ethernet" {
					ge.Type = GIDTypeRoCEv1
				}
			}
			ge.Netdev = readTrim(filepath.Join(dir, "gid_attrs/ndevs", e.Name()))
			if ifi, err := net.InterfaceByName(ge.Netdev); err == nil {
				ge.NetdevIfindex = uint32(ifi.Index)
			}
			out = append(out, ge)
		}
	}
	return out, nil
}

// validPort reports whether port is one of the device's ports.
func (c *Context) validPort(port uint8) bool {
	for _, p := range c.dev.Ports {
		if p.Port == uint32(port) {
			return true
		}
	}
	return false
}

func badPort(c *Context, op string, port uint8) error {
	return &Error{Op: op, Device: c.dev.Name,
		Err: fmt.Errorf("%w: %s has no port %d (ports are %s)", sys.NewErrno(sys.EINVAL), c.dev.Name, port, c.portList())}
}

func (c *Context) portList() string {
	var s []string
	for _, p := range c.dev.Ports {
		s = append(s, strconv.Itoa(int(p.Port)))
	}
	return strings.Join(s, ", ")
}

// QueryPKey returns entry index of port's P_Key table, in host order
// (0xffff is the default full-membership key). It reads sysfs
// ports/<port>/pkeys/<index>, as rdma-core's ibv_query_pkey does. A port
// the device does not have, or an index past the table (PortAttr.PkeyTblLen),
// is EINVAL.
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	op := "query pkey"
	if err := c.check(); err != nil {
		return 0, opErr(c.dev.Name, op, err)
	}
	if !c.validPort(port) {
		return 0, badPort(c, op, port)
	}
	if index < 0 {
		return 0, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: negative P_Key index %d", sys.NewErrno(sys.EINVAL), index)}
	}
	p := filepath.Join(c.dev.SysfsPath, "ports", strconv.Itoa(int(port)), "pkeys", strconv.Itoa(index))
	b, err := os.ReadFile(p)
	if err != nil {
		if os.IsNotExist(err) {
			n := "?"
			if ents, derr := os.ReadDir(filepath.Dir(p)); derr == nil {
				n = strconv.Itoa(len(ents))
			}
			return 0, &Error{Op: op, Device: c.dev.Name,
				Err: fmt.Errorf("%w: P_Key index %d of port %d is past the table (%s entries)", sys.NewErrno(sys.EINVAL), index, port, n)}
		}
		return 0, opErr(c.dev.Name, op, err)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 16)
	if err != nil {
		return 0, opErr(c.dev.Name, op, fmt.Errorf("%s: malformed P_Key %q", p, strings.TrimSpace(string(b))))
	}
	return uint16(v), nil
}

// PKeyIndex returns the index of pkey (host order) in port's P_Key table
// (rdma-core ibv_get_pkey_index). A P_Key not in the table is ENOENT.
func (c *Context) PKeyIndex(port uint8, pkey uint16) (int, error) {
	op := "get pkey index"
	pa, err := c.QueryPort(port)
	if err != nil {
		if !c.validPort(port) {
			return 0, badPort(c, op, port)
		}
		return 0, opErr(c.dev.Name, op, err)
	}
	for i := 0; i < int(pa.PkeyTblLen); i++ {
		k, err := c.QueryPKey(port, i)
		if err != nil {
			return 0, opErr(c.dev.Name, op, err)
		}
		if k == pkey {
			return i, nil
		}
	}
	return 0, &Error{Op: op, Device: c.dev.Name,
		Err: fmt.Errorf("%w: P_Key %#04x is not in port %d's table (%d entries)", sys.NewErrno(sys.ENOENT), pkey, port, pa.PkeyTblLen)}
}

// QueryGID returns entry index of port's GID table (rdma-core
// ibv_query_gid_ex): the QUERY_GID_ENTRY ioctl, or sysfs on kernels before
// 5.10. A port the device does not have, or an index past the table, is
// EINVAL; an index inside the table that holds no GID is ENODATA (errors.Is
// with ErrNoGID).
func (c *Context) QueryGID(port uint8, index int) (GIDEntry, error) {
	op := "query gid " + strconv.Itoa(int(port)) + "/" + strconv.Itoa(index)
	if !c.validPort(port) {
		if err := c.check(); err != nil {
			return GIDEntry{}, opErr(c.dev.Name, op, err)
		}
		return GIDEntry{}, badPort(c, op, port)
	}
	if index < 0 {
		return GIDEntry{}, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: negative GID index", sys.NewErrno(sys.EINVAL))}
	}
	if err := c.lock(); err != nil {
		return GIDEntry{}, opErr(c.dev.Name, op, err)
	}
	esz := abi.Size[abi.GIDEntry]()
	cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY, c.dev.DriverID)
	cmd.Const(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port))
	cmd.Const(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index))
	cmd.U32(abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
	out := cmd.PtrOut(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, esz)
	err := cmd.Exec(c.fd)
	var e abi.GIDEntry
	if err == nil {
		e = *abi.As[abi.GIDEntry](out)
	}
	c.mu.Unlock()
	if isFallback(err) {
		return c.gidSysfs(op, port, index)
	}
	if err != nil {
		return GIDEntry{}, gidErr(c, op, err)
	}
	return toGIDEntry(&e), nil
}

// ErrNoGID is wrapped by QueryGID for an index inside the GID table that
// holds no GID (the kernel's ENODATA, which it also matches).
var ErrNoGID = fmt.Errorf("no GID at this index: %w", sys.NewErrno(sys.ENODATA))

func gidErr(c *Context, op string, err error) error {
	if sys.ErrnoOf(err) == sys.ENODATA {
		return &Error{Op: op, Device: c.dev.Name, Err: ErrNoGID}
	}
	return opErr(c.dev.Name, op, err)
}

func toGIDEntry(e *abi.GIDEntry) GIDEntry {
	g := GIDEntry{GID: GID(e.GID), Index: e.GIDIndex, Port: e.PortNum, Type: GIDType(e.GIDType), NetdevIfindex: e.NetdevIfindex}
	if e.NetdevIfindex != 0 {
		if ifi, err := net.InterfaceByIndex(int(e.NetdevIfindex)); err == nil {
			g.Netdev = ifi.Name
		}
	}
	return g
}

// gidSysfs is QueryGID from sysfs (kernels before 5.10), with the kernel's
// answers: EINVAL past the table, ENODATA for an empty entry.
func (c *Context) gidSysfs(op string, port uint8, index int) (GIDEntry, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return GIDEntry{}, opErr(c.dev.Name, op, err)
	}
	if index >= pa.GIDTblLen {
		return GIDEntry{}, &Error{Op: op, Device: c.dev.Name,
			Err: fmt.Errorf("%w: GID index %d is past port %d's table (%d entries)", sys.NewErrno(sys.EINVAL), index, port, pa.GIDTblLen)}
	}
	all, err := c.gidTableSysfs()
	if err != nil {
		return GIDEntry{}, err
	}
	for _, g := range all {
		if g.Port == uint32(port) && g.Index == uint32(index) {
			return g, nil
		}
	}
	return GIDEntry{}, &Error{Op: op, Device: c.dev.Name, Err: ErrNoGID}
}

// QueryGIDTableInto fills entries with the valid GIDs of every port and
// returns how many (rdma-core ibv_query_gid_table with max_entries =
// len(entries)). A slice too short for them all, an empty one included, is
// EINVAL, as from the kernel. QueryGIDTable sizes the slice itself.
func (c *Context) QueryGIDTableInto(entries []GIDEntry) (int, error) {
	op := "query gid table"
	if err := c.check(); err != nil {
		return 0, opErr(c.dev.Name, op, err)
	}
	tooSmall := func(have int) error {
		return &Error{Op: op, Device: c.dev.Name,
			Err: fmt.Errorf("%w: room for %d entries, the table has %d", sys.NewErrno(sys.EINVAL), len(entries), have)}
	}
	esz := abi.Size[abi.GIDEntry]()
	if len(entries) == 0 {
		// The kernel refuses an empty buffer whatever the table holds.
		return 0, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: no room for any entry", sys.NewErrno(sys.EINVAL))}
	}
	if len(entries)*esz > sys.MaxAttrLen {
		all, err := c.gidTableSysfs()
		if err != nil {
			return 0, err
		}
		if len(all) > len(entries) {
			return 0, tooSmall(len(all))
		}
		return copy(entries, all), nil
	}
	if err := c.lock(); err != nil {
		return 0, opErr(c.dev.Name, op, err)
	}
	cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_TABLE, c.dev.DriverID)
	cmd.Const(abi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, uint64(esz))
	cmd.U32(abi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0)
	ents := cmd.PtrOut(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, len(entries)*esz)
	num := cmd.PtrOut(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, 8)
	err := cmd.Exec(c.fd)
	n := 0
	if err == nil {
		n = int(le64(num))
		if n > len(entries) {
			err = fmt.Errorf("kernel reported %d entries for a %d-entry buffer", n, len(entries))
		} else {
			for i := 0; i < n; i++ {
				e := *abi.As[abi.GIDEntry](ents[i*esz:])
				entries[i] = GIDEntry{GID: GID(e.GID), Index: e.GIDIndex, Port: e.PortNum, Type: GIDType(e.GIDType), NetdevIfindex: e.NetdevIfindex}
			}
		}
	}
	c.mu.Unlock()
	if isFallback(err) {
		all, err := c.gidTableSysfs()
		if err != nil {
			return 0, err
		}
		if len(all) > len(entries) {
			return 0, tooSmall(len(all))
		}
		return copy(entries, all), nil
	}
	if err != nil {
		if sys.ErrnoOf(err) == sys.EINVAL {
			return 0, &Error{Op: op, Device: c.dev.Name, Err: err, Hint: fmt.Sprintf("room for %d entries is too little for the table", len(entries))}
		}
		return 0, opErr(c.dev.Name, op, err)
	}
	for i := 0; i < n; i++ {
		if entries[i].NetdevIfindex != 0 {
			if ifi, err := net.InterfaceByIndex(int(entries[i].NetdevIfindex)); err == nil {
				entries[i].Netdev = ifi.Name
			}
		}
	}
	return n, nil
}
