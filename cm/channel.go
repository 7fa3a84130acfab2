package cm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// DevicePath is the rdma_cm character device (the rdma_ucm module).
var DevicePath = "/dev/infiniband/rdma_cm"

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space): it decides
// the QP type and the service id a port maps to.
type PortSpace uint16

const (
	PortSpaceTCP   PortSpace = abi.RDMA_PS_TCP   // RC; service id 0x0106xxxx
	PortSpaceUDP   PortSpace = abi.RDMA_PS_UDP   // UD (SIDR, multicast); Q_Key 0x01234567
	PortSpaceIB    PortSpace = abi.RDMA_PS_IB    // RC or UD, chosen at CreateID; AF_IB-native
	PortSpaceIPoIB PortSpace = abi.RDMA_PS_IPOIB // UD with the IPoIB Q_Key (InfiniBand only)
)

func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	case PortSpaceIPoIB:
		return "IPOIB"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(ps))
}

// Channel is an rdma_cm event channel: one open of /dev/infiniband/rdma_cm.
// Every id lives on one channel (commands go to its file; Migrate moves it).
// One goroutine per channel reads the kernel's events with GET_EVENT on the
// runtime poller (it parks; no thread sits in the kernel, nothing spins) and
// hands each to its id's queue, where ID.GetEvent and the waiting calls
// take it.
//
// Concurrency: every method is safe for concurrent use. Commands on a
// channel are serialised by one mutex (they share its command memory);
// Close destroys the channel's ids and ends their waiting calls with
// ErrClosed.
type Channel struct {
	fd *sys.PollFD

	mu    sync.Mutex // arena and closed
	arena *sys.Arena

	evArena *sys.Arena
	evCmd   sys.Buf
	evResp  []byte

	idsMu  sync.Mutex
	ids    map[*ID]struct{}
	closed atomic.Bool
	done   chan struct{} // the reader has returned
	once   sync.Once
	// readErr is the error that ended the reader (nil: Close did).
	readErr atomic.Pointer[error]
	// kick ends the reader's current wait so that it tries GET_EVENT
	// again: MIGRATE_ID moves queued events to this file without waking
	// its pollers (ucma.c: ucma_move_events), so no readability edge comes.
	kickMu sync.Mutex
	kick   context.CancelFunc
}

// registry maps uids to ids for every channel: the uid in an event record
// finds its id whichever channel read it (an id keeps its uid when it
// migrates). Uids come from a counter and are never reused, so a late event
// of a destroyed id finds nothing and is dropped.
var (
	registry sync.Map // uint64 -> *ID
	nextUID  atomic.Uint64
)

// NewChannel opens an event channel.
func NewChannel() (*Channel, error) {
	fd, err := sys.Open(DevicePath, sys.O_RDWR)
	if err != nil {
		if errors.Is(err, sys.ENOENT) || errors.Is(err, sys.ENODEV) {
			return nil, &Error{Op: "open " + DevicePath, Kind: uverbs.ErrNotSupported, Err: fmt.Errorf("%w (is the rdma_ucm module loaded?)", err)}
		}
		return nil, &Error{Op: "open " + DevicePath, Err: err}
	}
	pfd, err := sys.NewPollFD(fd, DevicePath)
	if err != nil {
		return nil, &Error{Op: "open " + DevicePath, Err: err}
	}
	ch := &Channel{fd: pfd, ids: map[*ID]struct{}{}, done: make(chan struct{})}
	if ch.arena, err = sys.NewArena(sys.Pagesize); err == nil {
		ch.evArena, err = sys.NewArena(sys.Pagesize)
	}
	if err != nil {
		ch.arena.Close()
		pfd.Close()
		return nil, &Error{Op: "open " + DevicePath, Err: err}
	}
	hdr := abi.Size[abi.UcmCmdHdr]()
	ch.evCmd, _ = ch.evArena.AllocBuf(hdr + abi.Size[abi.UcmGetEvent]())
	ch.evResp = ch.evArena.Alloc(abi.Size[abi.UcmEventResp]())
	h := abi.As[abi.UcmCmdHdr](ch.evCmd.Bytes())
	h.Cmd, h.In, h.Out = abi.RDMA_USER_CM_CMD_GET_EVENT, uint16(abi.Size[abi.UcmGetEvent]()), uint16(len(ch.evResp))
	abi.As[abi.UcmGetEvent](ch.evCmd.Bytes()[hdr:]).Response = sys.Addr(ch.evResp)
	go ch.readLoop()
	return ch, nil
}

// FD is the channel's descriptor number (-1 once closed).
func (ch *Channel) FD() int { return ch.fd.Int() }

// Close destroys every id on the channel (with DESTROY_ID's wire effects:
// REJ or DREQ to connected peers), closes the file and waits for the reader.
// It is idempotent.
func (ch *Channel) Close() error {
	if ch == nil {
		return nil
	}
	var err error
	ch.once.Do(func() {
		ch.closed.Store(true)
		ch.idsMu.Lock()
		ids := make([]*ID, 0, len(ch.ids))
		for id := range ch.ids {
			ids = append(ids, id)
		}
		ch.idsMu.Unlock()
		for _, id := range ids {
			id.Close()
		}
		err = ch.fd.Close()
		<-ch.done
		ch.mu.Lock()
		ch.arena.Close()
		ch.arena = nil
		ch.mu.Unlock()
		ch.evArena.Close()
	})
	return err
}

// Err reports why the channel's reader stopped early (nil while it runs or
// after Close).
func (ch *Channel) Err() error {
	if p := ch.readErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (ch *Channel) readLoop() {
	defer close(ch.done)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		ch.kickMu.Lock()
		ch.kick = cancel
		ch.kickMu.Unlock()
		err := ch.fd.WriteWhenReadable(ctx, ch.evCmd)
		cancel()
		if errors.Is(err, context.Canceled) {
			continue // kicked: every wait begins with a GET_EVENT attempt
		}
		if err != nil {
			if errors.Is(err, sys.ErrFDClosed) || ch.closed.Load() {
				return
			}
			err = &Error{Op: "get event", Err: err}
			ch.readErr.Store(&err)
			ch.failAll(err)
			return
		}
		ch.dispatch(ch.evResp)
	}
}

// wake makes the reader try GET_EVENT again.
func (ch *Channel) wake() {
	ch.kickMu.Lock()
	if ch.kick != nil {
		ch.kick()
	}
	ch.kickMu.Unlock()
}

// failAll ends every waiting call on the channel's ids with err (the reader
// cannot go on: a kernel error other than EAGAIN on GET_EVENT).
func (ch *Channel) failAll(err error) {
	ch.idsMu.Lock()
	defer ch.idsMu.Unlock()
	for id := range ch.ids {
		id.fail(err)
	}
}

// dispatch decodes one event record and queues it on its id.
func (ch *Channel) dispatch(rec []byte) {
	uid := le.Uint64(rec)
	typ := EventType(le.Uint32(rec[12:]))
	handle := le.Uint32(rec[8:])
	v, ok := registry.Load(uid)
	if !ok {
		// The id is gone. A connect request for a closed listener must be
		// answered now, or the client waits out the MRA (over a minute).
		if typ == EventConnectRequest {
			ch.rejectHandle(handle)
		}
		return
	}
	id := v.(*ID)
	if typ == EventDeviceRemoval {
		id.removed.Store(true)
		removals.Add(1)
	}
	raw, err := decodeEvent(rec, id.ud)
	if err != nil {
		return // cannot happen: rec is a whole record
	}
	ev := eventFromRaw(&raw, id, id.ud)
	if typ == EventConnectRequest {
		child := &ID{handle: handle, uid: nextUID.Add(1), ps: id.ps, qpType: id.qpType, ud: id.ud,
			notify: make(chan struct{}, 1), closeCh: make(chan struct{}), passive: true}
		child.ch.Store(ch)
		child.req = ev.Conn
		ch.addID(child)
		registry.Store(child.uid, child)
		ev.Child = child
	}
	id.push(ev)
}

// rejectHandle rejects and destroys a child id nobody will accept.
func (ch *Channel) rejectHandle(handle uint32) {
	ch.reject(handle, nil, RejectConsumerDefined)
	ch.destroy(abi.RDMA_USER_CM_CMD_DESTROY_ID, handle)
}

func (ch *Channel) addID(id *ID) {
	ch.idsMu.Lock()
	ch.ids[id] = struct{}{}
	ch.idsMu.Unlock()
}

func (ch *Channel) removeID(id *ID) {
	ch.idsMu.Lock()
	delete(ch.ids, id)
	ch.idsMu.Unlock()
}

// exec writes one ucma command of inLen bytes (after the header), which
// fill writes into in; resp is the address of outLen response bytes and
// scratch is scratchLen more bytes of command memory (SET_OPTION's optval).
// It returns a copy of the response.
func (ch *Channel) exec(cmd uint32, inLen, outLen, scratchLen int, fill func(in []byte, resp uint64, scratch []byte)) ([]byte, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.arena == nil {
		return nil, sys.ErrFDClosed
	}
	ch.arena.Reset()
	hdr := abi.Size[abi.UcmCmdHdr]()
	buf, ok := ch.arena.AllocBuf(hdr + inLen)
	out := ch.arena.Alloc(outLen)
	scratch := ch.arena.Alloc(scratchLen)
	if !ok || out == nil || scratch == nil {
		return nil, sys.ErrArenaFull
	}
	b := buf.Bytes()
	h := abi.As[abi.UcmCmdHdr](b)
	h.Cmd, h.In, h.Out = cmd, uint16(inLen), uint16(outLen)
	fill(b[hdr:], sys.Addr(out), scratch)
	if err := ch.fd.WriteCmd(buf); err != nil {
		return nil, err
	}
	return bytes.Clone(out), nil
}

func (ch *Channel) reject(handle uint32, data []byte, reason RejectReason) error {
	if len(data) > abi.RDMA_MAX_PRIVATE_DATA {
		return fmt.Errorf("cm: %d bytes of reject private data, the most is %d", len(data), abi.RDMA_MAX_PRIVATE_DATA)
	}
	_, err := ch.exec(abi.RDMA_USER_CM_CMD_REJECT, abi.Size[abi.UcmReject](), 0, 0, func(in []byte, _ uint64, _ []byte) {
		c := abi.As[abi.UcmReject](in)
		c.ID, c.Reason, c.PrivateDataLen = handle, uint8(reason), uint8(len(data))
		copy(c.PrivateData[:], data)
	})
	return err
}

// destroy is DESTROY_ID (or LEAVE_MCAST, the same layout); it returns
// events_reported.
func (ch *Channel) destroy(cmd uint32, handle uint32) (uint32, error) {
	out, err := ch.exec(cmd, abi.Size[abi.UcmDestroyID](), abi.Size[abi.UcmDestroyIDResp](), 0, func(in []byte, resp uint64, _ []byte) {
		c := abi.As[abi.UcmDestroyID](in)
		c.Response, c.ID = resp, handle
	})
	if err != nil {
		return 0, err
	}
	r, _ := abi.Read[abi.UcmDestroyIDResp](out)
	return r.EventsReported, nil
}
