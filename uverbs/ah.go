package uverbs

import (
	"fmt"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// AH is an address handle: where a UD send goes.
//
// Concurrency: an AH is immutable after creation; every method is safe for
// concurrent use.
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
	if err := c.lock(&pd.object); err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	ah := &AH{pd: pd, attr: attr, drv: drv}
	err = c.create(&ah.object, ah, &createCmd{kind: kindAH, op: op, drv: drv.DriverData(),
		writeCmd: abi.IB_USER_VERBS_CMD_CREATE_AH, writeOutLen: abi.Size[abi.CreateAHResp](),
		writeIn: func(id uint64) []byte {
			r, b := alloc[abi.CreateAH](c)
			r.UserHandle, r.PDHandle = id, pd.handle
			d := toDest(attr)
			r.Attr = abi.AHAttr{GRH: abi.GlobalRoute{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: d.SGIDIndex, HopLimit: d.HopLimit,
				TrafficClass: d.TrafficClass}, DLID: d.DLID, SL: d.SL, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
				IsGlobal: d.IsGlobal, PortNum: d.PortNum}
			return b
		},
		writeParse: func(out []byte) uint32 { return abi.As[abi.CreateAHResp](out).AHHandle },
		errMap: func(err error) error {
			if !attr.IsGlobal && sys.ErrnoOf(err) == sys.EINVAL {
				return &Error{Op: op, Device: c.dev.Name, Err: err, Hint: "RoCE addresses must be global (IsGlobal with a GRH)"}
			}
			return opErr(c.dev.Name, fmt.Sprintf("%s to %s", op, attr.GRH.DGID), err)
		},
	}, func(out []byte) error { return drv.Created(ah, out) }, nil)
	if err != nil {
		return nil, err
	}
	return ah, nil
}

// Close destroys the address handle.
func (ah *AH) Close() error {
	if ah == nil {
		return nil
	}
	return ah.closeObject("destroy ah", nil)
}

// RoCEAH is the address vector of a RoCE v2 destination: global, from the
// local GID at sgidIndex, with a hop limit of 64.
func RoCEAH(port, sgidIndex uint8, dgid GID) AHAttr {
	return AHAttr{IsGlobal: true, Port: port, GRH: GlobalRoute{DGID: dgid, SGIDIndex: sgidIndex, HopLimit: 64}}
}
