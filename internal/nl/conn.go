package nl

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

const nlmsgHdrLen = 16

// Conn is a NETLINK_RDMA socket. It is safe for concurrent use (requests are
// serialised).
type Conn struct {
	mu  sync.Mutex
	fd  *sys.FD
	seq uint32
	buf []byte
}

// Dial opens a NETLINK_RDMA socket. Without the ib_core module the kernel has
// no such protocol and Dial fails with an error wrapping ErrNotSupported.
func Dial() (*Conn, error) {
	fd, err := sys.NetlinkRDMA()
	if err != nil {
		if sys.ErrnoOf(err) == sys.EPROTONOSUPPORT {
			return nil, fmt.Errorf("rdma netlink: %w (is the ib_core kernel module loaded?)", sys.ErrNoDevice)
		}
		return nil, fmt.Errorf("rdma netlink socket: %w", err)
	}
	return &Conn{fd: fd, buf: make([]byte, 1<<16)}, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd.Close()
}

func msgType(op uint16) uint16 { return abi.RDMA_NL_NLDEV<<10 | op }

// Execute sends one nldev request and collects the reply messages' attribute
// payloads (one per message; several for a dump).
func (c *Conn) Execute(op uint16, flags uint16, attrs []byte) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd.Int() < 0 {
		return nil, sys.NewErrno(sys.EBADF)
	}
	c.seq++
	seq := c.seq
	req := make([]byte, nlmsgHdrLen+len(attrs))
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], msgType(op))
	le.PutUint16(req[6:], flags|abi.NLM_F_REQUEST|abi.NLM_F_ACK)
	le.PutUint32(req[8:], seq)
	copy(req[nlmsgHdrLen:], attrs)
	if err := sys.NetlinkSend(c.fd, req); err != nil {
		return nil, fmt.Errorf("rdma netlink send: %w", err)
	}
	var out [][]byte
	for {
		n, err := sys.NetlinkRecv(c.fd, c.buf)
		if err != nil {
			return nil, fmt.Errorf("rdma netlink receive: %w", err)
		}
		done, err := parseReply(c.buf[:n], seq, &out)
		if err != nil || done {
			return out, err
		}
	}
}

// parseReply walks the messages of one datagram. It reports done at
// NLMSG_DONE or at the ACK (an NLMSG_ERROR with errno 0).
func parseReply(b []byte, seq uint32, out *[][]byte) (bool, error) {
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return false, fmt.Errorf("%w: short netlink header", ErrMalformed)
		}
		n := int(le.Uint32(b[0:]))
		typ := le.Uint16(b[4:])
		mseq := le.Uint32(b[8:])
		if n < nlmsgHdrLen || n > len(b) {
			return false, fmt.Errorf("%w: netlink message length %d of %d", ErrMalformed, n, len(b))
		}
		body := b[nlmsgHdrLen:n]
		if a := align4(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
		if mseq != seq {
			continue // a stale reply to an earlier, abandoned request
		}
		switch typ {
		case abi.NLMSG_DONE:
			return true, nil
		case abi.NLMSG_ERROR:
			if len(body) < 4 {
				return false, fmt.Errorf("%w: short netlink error", ErrMalformed)
			}
			errno := -int32(le.Uint32(body))
			if errno == 0 {
				return true, nil
			}
			return false, sys.NewErrno(syscall.Errno(errno))
		default:
			cp := make([]byte, len(body))
			copy(cp, body)
			*out = append(*out, cp)
		}
	}
	return false, nil
}

// Device is one RDMA device as nldev reports it.
type Device struct {
	Index        uint32
	Name         string
	NodeGUID     uint64 // host order
	SysImageGUID uint64
	FWVersion    string
	NumPorts     uint32
	NodeType     uint8
	Protocol     string // "ib", "roce", "iw", ...
	CapFlags     uint64
}

func decodeDevice(b []byte) (Device, error) {
	as, err := ParseAttrs(b)
	if err != nil {
		return Device{}, err
	}
	s := toSet(as)
	var d Device
	var ok bool
	if d.Index, ok = s.u32(abi.RDMA_NLDEV_ATTR_DEV_INDEX); !ok {
		return d, fmt.Errorf("%w: device without index", ErrMalformed)
	}
	d.Name = s.str(abi.RDMA_NLDEV_ATTR_DEV_NAME)
	d.NodeGUID, _ = s.u64(abi.RDMA_NLDEV_ATTR_NODE_GUID)
	d.SysImageGUID, _ = s.u64(abi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID)
	d.FWVersion = s.str(abi.RDMA_NLDEV_ATTR_FW_VERSION)
	d.NumPorts, _ = s.u32(abi.RDMA_NLDEV_ATTR_PORT_INDEX)
	d.NodeType, _ = s.u8(abi.RDMA_NLDEV_ATTR_DEV_NODE_TYPE)
	d.Protocol = s.str(abi.RDMA_NLDEV_ATTR_DEV_PROTOCOL)
	d.CapFlags, _ = s.u64(abi.RDMA_NLDEV_ATTR_CAP_FLAGS)
	return d, nil
}

// Devices lists every RDMA device in the caller's network namespace.
func (c *Conn) Devices() ([]Device, error) {
	msgs, err := c.Execute(abi.RDMA_NLDEV_CMD_GET, abi.NLM_F_DUMP, nil)
	if err != nil {
		return nil, fmt.Errorf("rdma netlink device dump: %w", err)
	}
	var out []Device
	for _, m := range msgs {
		d, err := decodeDevice(m)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Port is one port of a device.
type Port struct {
	DevIndex     uint32
	Port         uint32
	State        uint8
	PhysState    uint8
	LID          uint32
	SMLID        uint32
	LMC          uint8
	SubnetPrefix uint64
	CapFlags     uint64
	NetdevIndex  uint32 // 0: none
	NetdevName   string
}

func decodePort(b []byte) (Port, error) {
	as, err := ParseAttrs(b)
	if err != nil {
		return Port{}, err
	}
	s := toSet(as)
	var p Port
	p.DevIndex, _ = s.u32(abi.RDMA_NLDEV_ATTR_DEV_INDEX)
	p.Port, _ = s.u32(abi.RDMA_NLDEV_ATTR_PORT_INDEX)
	p.State, _ = s.u8(abi.RDMA_NLDEV_ATTR_PORT_STATE)
	p.PhysState, _ = s.u8(abi.RDMA_NLDEV_ATTR_PORT_PHYS_STATE)
	p.LID, _ = s.u32(abi.RDMA_NLDEV_ATTR_LID)
	p.SMLID, _ = s.u32(abi.RDMA_NLDEV_ATTR_SM_LID)
	p.LMC, _ = s.u8(abi.RDMA_NLDEV_ATTR_LMC)
	p.SubnetPrefix, _ = s.u64(abi.RDMA_NLDEV_ATTR_SUBNET_PREFIX)
	p.CapFlags, _ = s.u64(abi.RDMA_NLDEV_ATTR_CAP_FLAGS)
	p.NetdevIndex, _ = s.u32(abi.RDMA_NLDEV_ATTR_NDEV_INDEX)
	p.NetdevName = s.str(abi.RDMA_NLDEV_ATTR_NDEV_NAME)
	return p, nil
}

// Ports lists the ports of device dev.
func (c *Conn) Ports(dev uint32) ([]Port, error) {
	var e Encoder
	e.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	msgs, err := c.Execute(abi.RDMA_NLDEV_CMD_PORT_GET, abi.NLM_F_DUMP, e.Bytes())
	if err != nil {
		return nil, fmt.Errorf("rdma netlink port dump of device %d: %w", dev, err)
	}
	var out []Port
	for _, m := range msgs {
		p, err := decodePort(m)
		if err != nil {
			return nil, err
		}
		if p.DevIndex == dev {
			out = append(out, p)
		}
	}
	return out, nil
}

// Chardev describes the character device of one RDMA client for a device.
type Chardev struct {
	Name     string // e.g. "uverbs0", "rdma_cm"
	Dev      uint64 // dev_t (huge encoding, as the kernel's huge_encode_dev)
	ABI      uint64
	DriverID uint32 // RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID; 0 if not reported
	HasDrvID bool
}

// Chardev asks which char device serves client typ ("uverbs", "rdma_cm",
// "umad") for device dev (pass NoDevice for clients not bound to a device).
func (c *Conn) Chardev(dev uint32, typ string) (Chardev, error) {
	var e Encoder
	if dev != NoDevice {
		e.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	}
	e.String(abi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, typ)
	msgs, err := c.Execute(abi.RDMA_NLDEV_CMD_GET_CHARDEV, 0, e.Bytes())
	if err != nil {
		return Chardev{}, fmt.Errorf("rdma netlink chardev %q of device %d: %w", typ, dev, err)
	}
	if len(msgs) == 0 {
		return Chardev{}, fmt.Errorf("rdma netlink chardev %q: empty reply", typ)
	}
	as, err := ParseAttrs(msgs[0])
	if err != nil {
		return Chardev{}, err
	}
	s := toSet(as)
	var cd Chardev
	cd.Name = s.str(abi.RDMA_NLDEV_ATTR_CHARDEV_NAME)
	cd.Dev, _ = s.u64(abi.RDMA_NLDEV_ATTR_CHARDEV)
	cd.ABI, _ = s.u64(abi.RDMA_NLDEV_ATTR_CHARDEV_ABI)
	if v, ok := s.u64(abi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID); ok {
		cd.DriverID, cd.HasDrvID = uint32(v), true
	}
	return cd, nil
}

// NoDevice is passed to Chardev for clients such as rdma_cm.
const NoDevice = ^uint32(0)

// SysAttrs are the RDMA subsystem's global settings.
type SysAttrs struct {
	NetnsShared bool // netns mode 1 = shared
	CopyOnFork  bool // kernel >= 5.13: pinned pages survive fork without MADV_DONTFORK
}

// Sys reads the subsystem attributes.
func (c *Conn) Sys() (SysAttrs, error) {
	msgs, err := c.Execute(abi.RDMA_NLDEV_CMD_SYS_GET, 0, nil)
	if err != nil {
		return SysAttrs{}, fmt.Errorf("rdma netlink sys get: %w", err)
	}
	var a SysAttrs
	if len(msgs) == 0 {
		return a, nil
	}
	as, err := ParseAttrs(msgs[0])
	if err != nil {
		return a, err
	}
	s := toSet(as)
	if v, ok := s.u8(abi.RDMA_NLDEV_SYS_ATTR_NETNS_MODE); ok {
		a.NetnsShared = v == 1
	}
	if v, ok := s.u8(abi.RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK); ok {
		a.CopyOnFork = v != 0
	}
	return a, nil
}

// ResSummary returns the kernel's count of each resource type ("pd", "cq",
// "qp", "mr", "cm_id", "ctx", "srq") on device dev.
func (c *Conn) ResSummary(dev uint32) (map[string]uint64, error) {
	var e Encoder
	e.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	msgs, err := c.Execute(abi.RDMA_NLDEV_CMD_RES_GET, 0, e.Bytes())
	if err != nil {
		return nil, fmt.Errorf("rdma netlink resource summary of device %d: %w", dev, err)
	}
	out := map[string]uint64{}
	for _, m := range msgs {
		if err := decodeSummary(m, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeSummary(m []byte, out map[string]uint64) error {
	as, err := ParseAttrs(m)
	if err != nil {
		return err
	}
	for _, a := range as {
		if a.Type != abi.RDMA_NLDEV_ATTR_RES_SUMMARY {
			continue
		}
		entries, err := ParseAttrs(a.Data)
		if err != nil {
			return err
		}
		for _, en := range entries {
			if en.Type != abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY {
				continue
			}
			fs, err := ParseAttrs(en.Data)
			if err != nil {
				return err
			}
			s := toSet(fs)
			v, _ := s.u64(abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR)
			out[s.str(abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME)] = v
		}
	}
	return nil
}

// LinkAdd creates a software RDMA device (`rdma link add NAME type TYPE netdev NETDEV`).
func (c *Conn) LinkAdd(name, typ, netdev string) error {
	var e Encoder
	e.String(abi.RDMA_NLDEV_ATTR_DEV_NAME, name)
	e.String(abi.RDMA_NLDEV_ATTR_LINK_TYPE, typ)
	e.String(abi.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
	if _, err := c.Execute(abi.RDMA_NLDEV_CMD_NEWLINK, abi.NLM_F_CREATE|abi.NLM_F_EXCL, e.Bytes()); err != nil {
		return fmt.Errorf("rdma link add %s type %s netdev %s: %w", name, typ, netdev, err)
	}
	return nil
}

// LinkDel removes a software RDMA device.
func (c *Conn) LinkDel(dev uint32) error {
	var e Encoder
	e.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	if _, err := c.Execute(abi.RDMA_NLDEV_CMD_DELLINK, 0, e.Bytes()); err != nil {
		return fmt.Errorf("rdma link delete device %d: %w", dev, err)
	}
	return nil
}
