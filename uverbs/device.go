package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ibgo/ibgo/internal/nl"
)

// Device is an RDMA device as the kernel lists it, before it is opened. It
// is a snapshot, not updated after discovery: safe for concurrent use, and
// Open may be called from several goroutines (each gets its own Context).
type Device struct {
	Name         string   // e.g. "rxe0", "mlx5_0"
	Index        uint32   // the kernel's device index (RDMA netlink); valid if HasIndex
	HasIndex     bool     //
	Driver       string   // kernel driver / provider name: "rxe", "mlx5", ...
	DriverID     uint32   // enum rdma_driver_id; goes into every ioctl header
	NodeType     NodeType //
	NodeGUID     GUID     //
	SysImageGUID GUID     //
	FWVer        string   // sysfs fw_ver (may be empty)
	NodeDesc     string   //
	BoardID      string   // sysfs board_id (hardware only)
	HCAType      string   // sysfs hca_type (hardware only)
	Uverbs       string   // "uverbs0"
	UverbsPath   string   // "/dev/infiniband/uverbs0"
	ABIVersion   int      // the driver's uverbs ABI version (sysfs)
	Ports        []PortInfo
	SysfsPath    string
}

// Transport is the device's verbs transport.
func (d *Device) Transport() Transport { return d.NodeType.Transport() }

// PortInfo is what sysfs and RDMA netlink say about a port without opening
// the device (the ibdev2netdev view).
type PortInfo struct {
	Port        uint32
	LinkLayer   string // "Ethernet", "InfiniBand"
	State       string // "ACTIVE", "DOWN", ...
	PhysState   string // "LinkUp", ...
	Rate        string // "100 Gb/sec (4X EDR)"
	Netdev      string // the Ethernet/IPoIB interface bound to the port, if any
	NetdevState string // that interface's operstate: "up", "down", "unknown"
}

// SysfsRoot is where the RDMA sysfs classes are read from (tests point it
// elsewhere).
var SysfsRoot = "/sys"

// DevRoot is where the uverbs character devices are opened from.
var DevRoot = "/dev/infiniband"

// noDeviceHint says what to check when no device is found.
const noDeviceHint = "load the RDMA driver and ib_uverbs (mlx5_ib for ConnectX; for soft-RoCE: " +
	"modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <ifname>); `rdma link show` lists what the kernel has"

// Devices lists the RDMA devices, sorted by name. With none it returns an
// error wrapping ErrNoDevice that says which modules and devices to check.
func Devices() ([]*Device, error) {
	ibdir := filepath.Join(SysfsRoot, "class/infiniband")
	ents, err := os.ReadDir(ibdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Op: "list devices", Err: err}
	}
	if len(ents) == 0 {
		return nil, &Error{Op: "list devices", Err: fmt.Errorf("%w: %s is missing or empty", ErrNoDevice, ibdir), Hint: noDeviceHint}
	}
	uverbs := uverbsByIBDev()
	var nldevs map[string]nl.Device
	var conn *nl.Conn
	if c, err := nl.Dial(); err == nil {
		conn = c
		defer conn.Close()
		if ds, err := c.Devices(); err == nil {
			nldevs = map[string]nl.Device{}
			for _, d := range ds {
				nldevs[d.Name] = d
			}
		}
	}
	var out []*Device
	for _, e := range ents {
		d := &Device{Name: e.Name(), SysfsPath: filepath.Join(ibdir, e.Name())}
		d.readSysfs()
		if u, ok := uverbs[d.Name]; ok {
			d.Uverbs = u.name
			d.ABIVersion = u.abi
			d.UverbsPath = filepath.Join(DevRoot, u.name)
		}
		// Take netlink's view only of the same device (by GUID): a name
		// alone can match a different device seen through another sysfs.
		if nd, ok := nldevs[d.Name]; ok && (nd.NodeGUID == d.NodeGUID.Uint64() || d.NodeGUID == GUID{}) {
			d.Index, d.HasIndex = nd.Index, true
			if conn != nil {
				d.fromNetlink(conn)
			}
		}
		d.fillDriver()
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeviceByName returns the named device. An unknown name gets an error that
// lists the devices that exist.
func DeviceByName(name string) (*Device, error) {
	ds, err := Devices()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range ds {
		if d.Name == name {
			return d, nil
		}
		names = append(names, d.Name)
	}
	return nil, &Error{Op: "find device", Device: name,
		Err: fmt.Errorf("%w: no device %q (devices: %s)", ErrNoDevice, name, strings.Join(names, ", "))}
}

// DeviceByNetdev finds the RDMA device and port bound to a network
// interface: the reverse of rdma-core's ibdev2netdev, and how SR-IOV
// virtual functions are told apart (a pod sees mlx5_0..mlx5_25 but knows its
// attachment as net1). No bound port is an error wrapping ErrNoDevice; a
// netdev bound to several ports (a bond) is an error naming them.
func DeviceByNetdev(netdev string) (*Device, PortInfo, error) {
	ds, err := Devices()
	if err != nil {
		return nil, PortInfo{}, err
	}
	return PickNetdev(ds, netdev)
}

// PickNetdev is DeviceByNetdev over the devices given.
func PickNetdev(devs []*Device, netdev string) (*Device, PortInfo, error) {
	var hitDev []*Device
	var hitPort []PortInfo
	known := map[string]bool{}
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.Netdev == "" {
				continue
			}
			known[p.Netdev] = true
			if p.Netdev == netdev {
				hitDev, hitPort = append(hitDev, d), append(hitPort, p)
			}
		}
	}
	switch len(hitDev) {
	case 1:
		return hitDev[0], hitPort[0], nil
	case 0:
		var names []string
		for n := range known {
			names = append(names, n)
		}
		sort.Strings(names)
		have := "no RDMA port has a network interface"
		if len(names) > 0 {
			have = "interfaces with an RDMA device: " + strings.Join(names, ", ")
		}
		return nil, PortInfo{}, fmt.Errorf("%w: no RDMA device is bound to network interface %q (%s)", ErrNoDevice, netdev, have)
	}
	var which []string
	for i, d := range hitDev {
		which = append(which, fmt.Sprintf("%s port %d", d.Name, hitPort[i].Port))
	}
	return nil, PortInfo{}, fmt.Errorf("network interface %q is bound to several RDMA ports (%s): choose one by device name", netdev, strings.Join(which, ", "))
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// afterColon turns sysfs "4: ACTIVE" into "ACTIVE" and returns the number.
func afterColon(s string) (int, string) {
	n, rest, ok := strings.Cut(s, ":")
	if !ok {
		return -1, s
	}
	v, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return -1, s
	}
	return v, strings.TrimSpace(rest)
}

func (d *Device) readSysfs() {
	p := d.SysfsPath
	if n, _ := afterColon(readTrim(filepath.Join(p, "node_type"))); n > 0 {
		d.NodeType = NodeType(n)
	} else {
		d.NodeType = NodeUnknown
	}
	d.NodeGUID, _ = ParseGUID(readTrim(filepath.Join(p, "node_guid")))
	d.SysImageGUID, _ = ParseGUID(readTrim(filepath.Join(p, "sys_image_guid")))
	d.FWVer = readTrim(filepath.Join(p, "fw_ver"))
	d.NodeDesc = readTrim(filepath.Join(p, "node_desc"))
	d.BoardID = readTrim(filepath.Join(p, "board_id"))
	d.HCAType = readTrim(filepath.Join(p, "hca_type"))
	ports, _ := os.ReadDir(filepath.Join(p, "ports"))
	for _, pe := range ports {
		n, err := strconv.Atoi(pe.Name())
		if err != nil || n <= 0 {
			continue
		}
		pp := filepath.Join(p, "ports", pe.Name())
		pi := PortInfo{Port: uint32(n), LinkLayer: readTrim(filepath.Join(pp, "link_layer")),
			Rate: readTrim(filepath.Join(pp, "rate"))}
		_, pi.State = afterColon(readTrim(filepath.Join(pp, "state")))
		_, pi.PhysState = afterColon(readTrim(filepath.Join(pp, "phys_state")))
		// Fallbacks for the netdev when RDMA netlink is unavailable: the
		// GID table's netdev, or (soft devices) the parent interface.
		pi.Netdev = readTrim(filepath.Join(pp, "gid_attrs/ndevs/0"))
		if pi.Netdev == "" {
			pi.Netdev = readTrim(filepath.Join(p, "parent"))
		}
		d.Ports = append(d.Ports, pi)
	}
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Port < d.Ports[j].Port })
	for i := range d.Ports {
		d.Ports[i].NetdevState = netdevState(d.Ports[i].Netdev)
	}
}

func netdevState(nd string) string {
	if nd == "" {
		return ""
	}
	return readTrim(filepath.Join(SysfsRoot, "class/net", nd, "operstate"))
}

func (d *Device) fromNetlink(c *nl.Conn) {
	if cd, err := c.Chardev(d.Index, "uverbs"); err == nil {
		if cd.HasDrvID {
			d.DriverID = cd.DriverID
		}
		if cd.Name != "" && d.Uverbs == "" {
			d.Uverbs = cd.Name
			d.UverbsPath = filepath.Join(DevRoot, cd.Name)
		}
		if d.ABIVersion == 0 {
			d.ABIVersion = int(cd.ABI)
		}
	}
	if ps, err := c.Ports(d.Index); err == nil {
		for _, p := range ps {
			for i := range d.Ports {
				if d.Ports[i].Port == p.Port && p.NetdevName != "" {
					d.Ports[i].Netdev = p.NetdevName
					d.Ports[i].NetdevState = netdevState(p.NetdevName)
				}
			}
		}
	}
}

// fillDriver names the driver, and finds the driver id when RDMA netlink did
// not report it (kernels before 5.x): by the kernel driver bound to the
// parent device, else by the device name's prefix, as rdma-core's
// VERBS_NAME_MATCH / PCI modalias tables do.
func (d *Device) fillDriver() {
	if d.DriverID != 0 {
		if k, ok := knownProviders[d.DriverID]; ok {
			d.Driver = k.name
			return
		}
	}
	drv := ""
	if t, err := os.Readlink(filepath.Join(d.SysfsPath, "device/driver")); err == nil {
		drv = filepath.Base(t)
	}
	switch {
	case strings.HasPrefix(drv, "mlx5"), strings.HasPrefix(d.Name, "mlx5_"):
		d.Driver = "mlx5"
		if d.DriverID == 0 {
			d.DriverID = 1
		}
	case strings.HasPrefix(d.Name, "rxe") || (drv == "" && d.NodeDesc == "rxe"):
		d.Driver = "rxe"
		if d.DriverID == 0 {
			d.DriverID = 14
		}
	case drv != "":
		d.Driver = drv
	default:
		d.Driver = "unknown"
	}
}

type uverbsDev struct {
	name string
	abi  int
}

// uverbsByIBDev maps device names to their uverbs char devices through
// /sys/class/infiniband_verbs/uverbsN/ibdev.
func uverbsByIBDev() map[string]uverbsDev {
	out := map[string]uverbsDev{}
	dir := filepath.Join(SysfsRoot, "class/infiniband_verbs")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		ib := readTrim(filepath.Join(dir, e.Name(), "ibdev"))
		if ib == "" {
			continue
		}
		abi, _ := strconv.Atoi(readTrim(filepath.Join(dir, e.Name(), "abi_version")))
		out[ib] = uverbsDev{e.Name(), abi}
	}
	return out
}
