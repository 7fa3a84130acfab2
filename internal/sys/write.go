package sys

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
)

// WriteCommand is one legacy uverbs "write" command (enum ib_uverbs_write_cmds),
// with the core and driver halves of its request and response kept apart so it
// can go either through write(2) or through the INVOKE_WRITE ioctl.
//
// For non-extended commands that have a response, CoreIn begins with the u64
// `response` field; the transport fills it in. All slices must be arena
// memory; nothing checks it (they are []byte, not Buf), and the kernel writes
// CoreOut and UHWOut during the call.
type WriteCommand struct {
	Cmd      uint32 // command number, without IB_USER_VERBS_CMD_FLAG_EXTENDED
	Extended bool   // an IB_USER_VERBS_EX_CMD_* command
	CoreIn   []byte
	UHWIn    []byte
	CoreOut  []byte
	UHWOut   []byte
}

// ExecWrite sends c through write(2) in the layout of
// rdma-core libibverbs/cmd_fallback.c: _execute_cmd_write[_ex]. The response
// buffers must be contiguous (CoreOut immediately followed by UHWOut) because
// the kernel takes a single response address.
func ExecWrite(fd *FD, a *Arena, c *WriteCommand) error {
	if len(c.UHWOut) > 0 && len(c.CoreOut) > 0 && Addr(c.CoreOut)+uint64(len(c.CoreOut)) != Addr(c.UHWOut) {
		return fmt.Errorf("write command %d: core and driver responses must be contiguous", c.Cmd)
	}
	resp := Addr(c.CoreOut)
	if len(c.CoreOut) == 0 {
		resp = Addr(c.UHWOut)
	}
	outLen := len(c.CoreOut) + len(c.UHWOut)
	hdrLen := int(unsafe.Sizeof(abi.CmdHdr{}))
	if !c.Extended {
		n := hdrLen + len(c.CoreIn) + len(c.UHWIn)
		if n%4 != 0 || outLen%4 != 0 {
			return fmt.Errorf("write command %d: sizes %d/%d not multiples of 4", c.Cmd, n, outLen)
		}
		if n/4 > 0xffff || outLen/4 > 0xffff {
			return fmt.Errorf("write command %d: %d/%d bytes do not fit ib_uverbs_cmd_hdr's u16 word counts", c.Cmd, n, outLen)
		}
		if outLen > 0 && len(c.CoreIn) < 8 {
			return fmt.Errorf("write command %d: a response needs the u64 response field at the start of the request", c.Cmd)
		}
		bb, ok := a.AllocBuf(n)
		if !ok {
			return ErrArenaFull
		}
		buf := bb.b
		h := (*abi.CmdHdr)(unsafe.Pointer(&buf[0]))
		h.Command = c.Cmd
		h.InWords = uint16(n / 4)
		h.OutWords = uint16(outLen / 4)
		copy(buf[hdrLen:], c.CoreIn)
		copy(buf[hdrLen+len(c.CoreIn):], c.UHWIn)
		if outLen > 0 {
			binary.LittleEndian.PutUint64(buf[hdrLen:], resp)
		}
		return Write(fd, bb)
	}
	exLen := int(unsafe.Sizeof(abi.ExCmdHdr{}))
	if len(c.CoreIn)%8 != 0 || len(c.UHWIn)%8 != 0 || len(c.CoreOut)%8 != 0 || len(c.UHWOut)%8 != 0 {
		return fmt.Errorf("extended write command %d: sizes not multiples of 8", c.Cmd)
	}
	if len(c.CoreIn)/8 > 0xffff || len(c.CoreOut)/8 > 0xffff || len(c.UHWIn)/8 > 0xffff || len(c.UHWOut)/8 > 0xffff {
		return fmt.Errorf("extended write command %d: sizes do not fit the u16 word counts", c.Cmd)
	}
	n := hdrLen + exLen + len(c.CoreIn) + len(c.UHWIn)
	bb, ok := a.AllocBuf(n)
	if !ok {
		return ErrArenaFull
	}
	buf := bb.b
	h := (*abi.CmdHdr)(unsafe.Pointer(&buf[0]))
	h.Command = c.Cmd | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED
	h.InWords = uint16(len(c.CoreIn) / 8)
	h.OutWords = uint16(len(c.CoreOut) / 8)
	ex := (*abi.ExCmdHdr)(unsafe.Pointer(&buf[hdrLen]))
	ex.Response = resp
	ex.ProviderInWords = uint16(len(c.UHWIn) / 8)
	ex.ProviderOutWords = uint16(len(c.UHWOut) / 8)
	copy(buf[hdrLen+exLen:], c.CoreIn)
	copy(buf[hdrLen+exLen+len(c.CoreIn):], c.UHWIn)
	return Write(fd, bb)
}

// ExecInvokeWrite sends c through DEVICE/INVOKE_WRITE (kernel >= 5.0), the
// transport rdma-core prefers when the kernel has it
// (rdma-core libibverbs/cmd_fallback.c: ioctl_write).
func ExecInvokeWrite(fd *FD, a *Arena, driverID uint32, c *WriteCommand) error {
	cmd := NewIoctl(a, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_INVOKE_WRITE, driverID)
	w := uint64(c.Cmd)
	if c.Extended {
		w |= abi.IB_USER_VERBS_CMD_FLAG_EXTENDED
	}
	cmd.Const(abi.UVERBS_ATTR_WRITE_CMD, w)
	if len(c.CoreIn) > 0 {
		cmd.PtrInArena(abi.UVERBS_ATTR_CORE_IN, c.CoreIn)
	}
	if len(c.CoreOut) > 0 {
		cmd.PtrOutArena(abi.UVERBS_ATTR_CORE_OUT, c.CoreOut)
	}
	if len(c.UHWIn) > 0 {
		cmd.PtrInArena(abi.UVERBS_ATTR_UHW_IN, c.UHWIn)
	}
	if len(c.UHWOut) > 0 {
		cmd.PtrOutArena(abi.UVERBS_ATTR_UHW_OUT, c.UHWOut)
	}
	return cmd.Exec(fd)
}
