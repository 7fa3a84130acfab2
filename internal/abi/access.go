package abi

import (
	"fmt"
	"unsafe"
)

// Size is the size in bytes of the uapi struct T.
func Size[T any]() int {
	var v T
	return int(unsafe.Sizeof(v))
}

// As views the first Size[T]() bytes of b as a *T, so command structs are
// filled and responses read in place (in the arena the kernel reads and
// writes) without unsafe in the callers. b comes from an allocation the
// caller sized with Size[T]; a shorter b is a programming error and panics
// with the sizes rather than letting a write run past b. T must be one of
// this package's uapi structs: fixed size, no pointers, alignment at most 8
// (the arena aligns every allocation to 8). b must be aligned for T: arena
// memory is; a Go byte array is not (read into a T through Bytes instead).
func As[T any](b []byte) *T {
	n := Size[T]()
	if len(b) < n {
		var v T
		panic(fmt.Sprintf("abi.As[%T]: %d-byte buffer for a %d-byte struct", v, len(b), n))
	}
	return (*T)(unsafe.Pointer(&b[0]))
}

// Read copies a T out of b; ok is false (and T zero) when b is too short.
// Use it for bytes whose length someone else decided (a driver response).
func Read[T any](b []byte) (v T, ok bool) {
	if len(b) < Size[T]() {
		return v, false
	}
	return *(*T)(unsafe.Pointer(&b[0])), true
}

// Bytes returns v's memory as a byte slice (for payloads copied into an
// attribute or command).
func Bytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), Size[T]())
}

// ExQueryDeviceRespEnd says where each optional field of ExQueryDeviceResp
// ends: a field is valid only when the kernel's response_length reaches its
// end (rdma-core libibverbs/cmd_device.c: CAN_COPY). ODPCapsStart is where
// the extended part begins.
var ExQueryDeviceRespEnd = func() (e struct {
	ODPCapsStart, ODPCaps, TimestampMask, HCACoreClock, DeviceCapFlagsEx, RSSCaps,
	MaxWQTypeRQ, RawPacketCaps, TMCaps, CQModerationCaps, MaxDMSize, XRCODPCaps uint32
}) {
	var r ExQueryDeviceResp
	end := func(off, size uintptr) uint32 { return uint32(off + size) }
	e.ODPCapsStart = uint32(unsafe.Offsetof(r.ODPCaps))
	e.ODPCaps = end(unsafe.Offsetof(r.ODPCaps), unsafe.Sizeof(r.ODPCaps))
	e.TimestampMask = end(unsafe.Offsetof(r.TimestampMask), 8)
	e.HCACoreClock = end(unsafe.Offsetof(r.HCACoreClock), 8)
	e.DeviceCapFlagsEx = end(unsafe.Offsetof(r.DeviceCapFlagsEx), 8)
	e.RSSCaps = end(unsafe.Offsetof(r.RSSCaps), unsafe.Sizeof(r.RSSCaps))
	e.MaxWQTypeRQ = end(unsafe.Offsetof(r.MaxWQTypeRQ), 4)
	e.RawPacketCaps = end(unsafe.Offsetof(r.RawPacketCaps), 4)
	e.TMCaps = end(unsafe.Offsetof(r.TMCaps), unsafe.Sizeof(r.TMCaps))
	e.CQModerationCaps = end(unsafe.Offsetof(r.CQModerationCaps), unsafe.Sizeof(r.CQModerationCaps))
	e.MaxDMSize = end(unsafe.Offsetof(r.MaxDMSize), 8)
	e.XRCODPCaps = end(unsafe.Offsetof(r.XRCODPCaps), 4)
	return e
}()
