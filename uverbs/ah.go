package uverbs

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// AH is an address handle: where a UD send goes.
type AH struct {
	object
	pd   *PD
	attr AHAttr
	drv  AHDriver
}

// Attr is the address the handle was created for.
func (ah *AH) Attr() AHAttr { return ah.attr }

// Driver returns the provider's half of the AH (rxe keeps its AH number there).
func (ah *AH) Driver() AHDriver { return ah.drv }

// CreateAH creates an address handle (CREATE_AH). On RoCE the address must be
// global (IsGlobal with a GRH naming the source GID index); the kernel
// resolves the destination MAC, so the destination must be reachable.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	op := "create ah"
	if err := pd.check(); err != nil {
		return nil, opErr("", op, err)
	}
	c := pd.ctx
	drv, err := c.prov.NewAH(&attr)
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	dd := drv.DriverData()
	c.nextID++
	id := c.nextID
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateAH{})))
	r := (*abi.CreateAH)(unsafe.Pointer(&in[0]))
	r.UserHandle, r.PDHandle = id, pd.handle
	d := toDest(attr)
	r.Attr = abi.AHAttr{GRH: abi.GlobalRoute{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: d.SGIDIndex, HopLimit: d.HopLimit,
		TrafficClass: d.TrafficClass}, DLID: d.DLID, SL: d.SL, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal, PortNum: d.PortNum}
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateAHResp{})) + dd.OutLen)
	w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_CREATE_AH, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In),
		CoreOut: out[:unsafe.Sizeof(abi.CreateAHResp{})], UHWOut: out[unsafe.Sizeof(abi.CreateAHResp{}):]}
	if err := c.execWrite(w); err != nil {
		if !attr.IsGlobal && sys.ErrnoOf(err) == unix.EINVAL {
			return nil, &Error{Op: op, Device: c.dev.Name, Err: err, Hint: "RoCE addresses must be global (IsGlobal with a GRH)"}
		}
		return nil, opErr(c.dev.Name, fmt.Sprintf("%s to %s", op, attr.GRH.DGID), err)
	}
	ah := &AH{pd: pd, attr: attr, drv: drv}
	ah.handle = (*abi.CreateAHResp)(unsafe.Pointer(&out[0])).AHHandle
	ah.ctx, ah.kind, ah.id = c, "ah", id
	if err := drv.Created(ah, w.UHWOut); err != nil {
		c.destroyAHLocked(ah)
		return nil, opErr(c.dev.Name, op, err)
	}
	c.live[id] = ah
	return ah, nil
}

// Close destroys the address handle.
func (ah *AH) Close() error {
	if ah == nil || ah.closed.Load() {
		return nil
	}
	c := ah.ctx
	if err := c.lock(); err != nil {
		ah.closed.Store(true)
		return nil
	}
	defer c.mu.Unlock()
	if err := c.destroyAHLocked(ah); err != nil {
		return opErr(c.dev.Name, "destroy ah", err)
	}
	ah.closed.Store(true)
	delete(c.live, ah.id)
	return nil
}

func (c *Context) destroyAHLocked(ah *AH) error {
	_, err := c.destroy(abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY, abi.UVERBS_ATTR_DESTROY_AH_HANDLE, ah.handle, -1, 0,
		func() *sys.WriteCommand {
			in := c.arena.Alloc(int(unsafe.Sizeof(abi.DestroyAH{})))
			(*abi.DestroyAH)(unsafe.Pointer(&in[0])).AHHandle = ah.handle
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_AH, CoreIn: in}
		})
	return err
}

// RoCEAH is the address vector of a RoCE v2 destination: global, from the
// local GID at sgidIndex, with a hop limit of 64.
func RoCEAH(port, sgidIndex uint8, dgid GID) AHAttr {
	return AHAttr{IsGlobal: true, Port: port, GRH: GlobalRoute{DGID: dgid, SGIDIndex: sgidIndex, HopLimit: 64}}
}
