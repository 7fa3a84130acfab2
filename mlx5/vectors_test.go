package mlx5

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// vectorDir is where the libmlx5 golden vectors are: testdata/vectors/eth
// (recorded from libmlx5 44 over an emulated kernel; testdata/vectors/
// README.md says how), or $IBGO_MLX5_VECTORS to replay another recording.
func vectorDir(t testing.TB) string {
	d := filepath.Join("testdata", "vectors", "eth")
	if e := os.Getenv("IBGO_MLX5_VECTORS"); e != "" {
		d = e
	}
	if _, err := os.Stat(filepath.Join(d, "rc_send.json")); err != nil {
		t.Fatalf("mlx5 golden vectors: %v", err)
	}
	return d
}

func loadJSON(t testing.TB, name string, v any) {
	b, err := os.ReadFile(filepath.Join(vectorDir(t), name))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// num parses the vectors' integers: JSON numbers or "0x.." strings.
type num uint64

func (n *num) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseUint(s, 0, 64)
	*n = num(v)
	return err
}

type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(s)
	*h = v
	return err
}

type vCap struct {
	MaxSendWR     num `json:"max_send_wr"`
	MaxRecvWR     num `json:"max_recv_wr"`
	MaxSendSGE    num `json:"max_send_sge"`
	MaxRecvSGE    num `json:"max_recv_sge"`
	MaxInlineData num `json:"max_inline_data"`
	SQSigAll      num `json:"sq_sig_all"`
}

func (c vCap) qpCap() uverbs.QPCap {
	return uverbs.QPCap{MaxSendWR: uint32(c.MaxSendWR), MaxRecvWR: uint32(c.MaxRecvWR), MaxSendSGE: uint32(c.MaxSendSGE),
		MaxRecvSGE: uint32(c.MaxRecvSGE), MaxInlineData: uint32(c.MaxInlineData)}
}

type vCQ struct {
	CQN    num `json:"cqn"`
	CQECnt num `json:"cqe_cnt"`
	CQE    num `json:"ibv_cq_cqe"`
}

type vQP struct {
	Type       num  `json:"qp_type"`
	QPN        num  `json:"qpn"`
	UIDX       num  `json:"uidx"`
	BfregIndex num  `json:"bfreg_index"`
	Requested  vCap `json:"requested_cap"`
	DV         struct {
		SQWQECnt   num `json:"sq_wqe_cnt"`
		SQStride   num `json:"sq_stride"`
		RQWQECnt   num `json:"rq_wqe_cnt"`
		RQStride   num `json:"rq_stride"`
		SQOffset   num `json:"sq_offset_in_buf"`
		BfSize     num `json:"bf_size"`
		BfRegOffet num `json:"bf_reg_offset_in_uar_page"`
	} `json:"dv"`
}

type vSGE struct {
	Addr   num      `json:"addr"`
	Length num      `json:"length"`
	LKey   num      `json:"lkey"`
	Inline hexBytes `json:"inline_bytes"`
}

type vAH struct {
	DLID         num      `json:"dlid"`
	SL           num      `json:"sl"`
	SrcPathBits  num      `json:"src_path_bits"`
	StaticRate   num      `json:"static_rate"`
	IsGlobal     num      `json:"is_global"`
	DGID         hexBytes `json:"dgid"`
	FlowLabel    num      `json:"flow_label"`
	SGIDIndex    num      `json:"sgid_index"`
	HopLimit     num      `json:"hop_limit"`
	TrafficClass num      `json:"traffic_class"`
}

type vWR struct {
	WRID       num    `json:"wr_id"`
	OpcodeNum  num    `json:"opcode_num"`
	Flags      num    `json:"send_flags"`
	SGL        []vSGE `json:"sg_list"`
	ImmBE      num    `json:"imm_data_be"`
	RemoteAddr num    `json:"remote_addr"`
	RKey       num    `json:"rkey"`
	CompareAdd num    `json:"compare_add"`
	Swap       num    `json:"swap"`
	RemoteQPN  num    `json:"remote_qpn"`
	RemoteQKey num    `json:"remote_qkey"`
	AH         *vAH   `json:"ah_attr"`
}

type vWC struct {
	WRID      num `json:"wr_id"`
	Status    num `json:"status"`
	Opcode    num `json:"opcode"`
	VendorErr num `json:"vendor_err"`
	ByteLen   num `json:"byte_len"`
	ImmRaw    num `json:"imm_data_raw"`
	QPN       num `json:"qp_num"`
	SrcQP     num `json:"src_qp"`
	Flags     num `json:"wc_flags"`
	Pkey      num `json:"pkey_index"`
	SLID      num `json:"slid"`
	SL        num `json:"sl"`
	DLIDPath  num `json:"dlid_path_bits"`
}

type vCQE struct {
	CI    num      `json:"ci"`
	Slot  num      `json:"slot"`
	CQE64 hexBytes `json:"cqe64"`
}

type vCompletion struct {
	Name    string `json:"name"`
	CQ      string `json:"cq"`
	CQEs    []vCQE `json:"cqes"`
	PollMax num    `json:"poll_max"`
	PollRet num    `json:"poll_ret"`
	WCs     []vWC  `json:"wcs"`
	DBAfter struct {
		Bytes hexBytes `json:"bytes"`
	} `json:"cq_doorbell_record_after"`
	RecvBuf  hexBytes `json:"recv_buffer_after_first_32B"`
	LocalBuf hexBytes `json:"local_buffer_after_first_32B"`
}

type vSendCase struct {
	Name     string `json:"name"`
	WRs      []vWR  `json:"wrs"`
	Ret      num    `json:"ret"`
	BadWR    *num   `json:"bad_wr_index"`
	PIBefore num    `json:"sq_pi_before"`
	PIAfter  num    `json:"sq_pi_after"`
	WQEBBs   []struct {
		Index num      `json:"index"`
		Bytes hexBytes `json:"bytes"`
	} `json:"wqebbs"`
	WQEs []struct {
		Index num      `json:"index"`
		DS    num      `json:"ds"`
		Bytes hexBytes `json:"bytes"`
	} `json:"wqes"`
	DBRec struct {
		Bytes hexBytes `json:"bytes"`
	} `json:"doorbell_record"`
	UAR struct {
		Writes []struct {
			Offset num      `json:"offset"`
			Bytes  hexBytes `json:"bytes"`
		} `json:"uar_writes"`
	} `json:"uar"`
	Completion *vCompletion `json:"completion"`
	Comment    string       `json:"comment"`
	// A responder case in a send file (ud_recv_cqe_send_imm_grh) has no
	// WRs and its CQEs at the top level.
	CQEs    []vCQE `json:"cqes"`
	PollMax num    `json:"poll_max"`
	PollRet num    `json:"poll_ret"`
	WCs     []vWC  `json:"wcs"`
	DBAfter struct {
		Bytes hexBytes `json:"bytes"`
	} `json:"cq_doorbell_record_after"`
}

type vSendFile struct {
	SendCQ      vCQ         `json:"send_cq"`
	RecvCQ      vCQ         `json:"recv_cq"`
	QP          vQP         `json:"qp"`
	ReturnedCap vCap        `json:"returned_cap"`
	Cases       []vSendCase `json:"cases"`
	RecvCases   []struct {
		Name string `json:"name"`
		WRs  []vWR  `json:"wrs"`
		Ret  num    `json:"ret"`
		WQEs []struct {
			Index num      `json:"index"`
			Bytes hexBytes `json:"bytes"`
		} `json:"rq_wqes"`
		DBRec struct {
			Bytes hexBytes `json:"bytes"`
		} `json:"doorbell_record"`
	} `json:"recv_cases"`
}

// testCtx is the context response the fake kernel of the vectors gave
// (README: qp_tab_size 2^18, bf_reg_size 512, 16 static bfregs, ...).
func testCtxResp() *abi.Mlx5AllocUcontextResp {
	return &abi.Mlx5AllocUcontextResp{QPTabSize: 1 << 18, BfRegSize: 512, TotBfregs: 16, CacheLineSize: 64,
		MaxSQDescSz: 512, MaxRQDescSz: 512, MaxSendWQEBB: 32768, MaxRecvWR: 32768, MaxSRQRecvWR: 32768,
		NumPorts: 1, ResponseLength: 72, CQEVersion: 1, CmdsSuppUHW: 3, EthMinInline: 1, LogUARSize: 12, NumUARsPerPage: 1}
}

// alignedMem returns n zeroed bytes aligned to 4096 that stay reachable
// through the returned slice.
func alignedMem(n int) []byte {
	b := make([]byte, n+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&b[0]))&4095)) & 4095
	return b[off : off+n : off+n]
}

func memAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// rig is a QP with its CQs over plain memory: what the provider builds from
// mmapped buffers, here built directly so the bytes can be inspected.
type rig struct {
	t      testing.TB
	rsc    *rscTable
	uar    []byte
	qpBuf  []byte
	qpDB   *[2]uint32
	sq     *sendQueue
	rq     *recvQueue
	scq    *cqRing
	rcq    *cqRing
	lay    qpLayout
	ahs    map[*uverbs.AH]*av
	keep   [][]byte
	scqBuf []byte
	rcqBuf []byte
}

func newCQRing(ncqe uint32, cqn uint32, rsc *rscTable, uar []byte) (*cqRing, []byte) {
	b := alignedMem(int(ncqe) * 64)
	c := &cqRing{buf: unsafe.Pointer(&b[0]), ncqe: ncqe, dbrec: new([2]uint32), cqn: cqn, rsc: rsc}
	if uar != nil {
		c.uar = unsafe.Pointer(&uar[0])
	}
	c.initCQEs()
	return c, b
}

func newRig(t testing.TB, q vQP, scq, rcq vCQ) *rig {
	r := &rig{t: t, rsc: &rscTable{}, uar: alignedMem(4096), ahs: map[*uverbs.AH]*av{}}
	typ := uverbs.QPType(q.Type)
	lay, err := calcQP(typ, q.Requested.qpCap(), false, testCtxResp())
	require.NoError(t, err)
	r.lay = lay
	r.qpBuf = alignedMem(int(lay.bufSize))
	r.qpDB = new([2]uint32)
	base := unsafe.Pointer(&r.qpBuf[0])
	sqBase := unsafe.Add(base, lay.sqOffset)
	r.sq = &sendQueue{
		wq: wq{wrid: make([]uint64, lay.sqWQECnt), wqeHead: make([]uint32, lay.sqWQECnt), wqeCnt: lay.sqWQECnt,
			maxPost: lay.cap.MaxSendWR, maxGS: int(lay.cap.MaxSendSGE), buf: sqBase, shift: sendWQEBBSh},
		end: unsafe.Add(sqBase, lay.sqWQECnt*sendWQEBB), qpn: uint32(q.QPN), qpType: typ,
		maxInline: int(lay.cap.MaxInlineData), stage: make([]byte, lay.cap.MaxInlineData), dbrec: r.qpDB, preferBF: true,
		bf: &bfReg{reg: unsafe.Pointer(&r.uar[bfOffset+(q.BfregIndex%4)*512]), bufSize: 256, uuarn: uint32(q.BfregIndex)},
	}
	if q.Requested.SQSigAll != 0 {
		r.sq.sigBits = ctrlCQUpdate
	}
	r.sq.ahAV = func(a *uverbs.AH) (*av, bool) { v, ok := r.ahs[a]; return v, ok }
	r.rq = &recvQueue{wq: wq{wrid: make([]uint64, lay.rqWQECnt), wqeCnt: lay.rqWQECnt, maxPost: lay.cap.MaxRecvWR,
		maxGS: int(lay.cap.MaxRecvSGE), buf: base, shift: lay.rqShift}, dbrec: r.qpDB}
	r.sq.local, r.rq.local, r.sq.mrGen = testLocal, testLocal, &uverbs.Generation{}
	res := &resource{qpn: uint32(q.QPN), typ: typ, sq: r.sq, rq: r.rq}
	// libmlx5 hands user indexes out from 0; the vectors' QPs are the
	// context's QPs in creation order, so fill the table up to this one.
	for i := uint32(0); i < uint32(q.UIDX); i++ {
		_, _ = r.rsc.store(&resource{})
	}
	uidx, err := r.rsc.store(res)
	require.NoError(t, err)
	require.Equal(t, uint32(q.UIDX), uidx)
	r.scq, r.scqBuf = newCQRing(uint32(scq.CQECnt), uint32(scq.CQN), r.rsc, nil)
	r.rcq, r.rcqBuf = newCQRing(uint32(rcq.CQECnt), uint32(rcq.CQN), r.rsc, nil)
	return r
}

func (r *rig) bytesOf(b []byte) uint64 {
	r.keep = append(r.keep, b)
	return memAddr(b)
}

func (r *rig) sendWRs(ws []vWR, port portInfo, sport uint16) []uverbs.SendWR {
	out := make([]uverbs.SendWR, len(ws))
	for i, w := range ws {
		o := &out[i]
		o.WRID, o.Opcode, o.Flags = uint64(w.WRID), uverbs.WROpcode(w.OpcodeNum), uverbs.SendFlags(w.Flags)
		o.Imm = uint32(w.ImmBE) // imm_data_be is the value in network order, i.e. the host-order immediate
		o.RemoteAddr, o.RKey = uint64(w.RemoteAddr), uint32(w.RKey)
		o.CompareAdd, o.Swap = uint64(w.CompareAdd), uint64(w.Swap)
		o.RemoteQPN, o.RemoteQKey = uint32(w.RemoteQPN), uint32(w.RemoteQKey)
		for _, s := range w.SGL {
			addr := uint64(s.Addr)
			if s.Inline != nil {
				addr = r.bytesOf(append([]byte(nil), s.Inline...))
			}
			o.SGL = append(o.SGL, uverbs.SGE{Addr: addr, Length: uint32(s.Length), LKey: uint32(s.LKey)})
		}
		if w.AH != nil {
			p := AVParams{Ethernet: port.eth, RoCEv2: port.eth && port.gidType[uint32(w.AH.SGIDIndex)] == 2, UDPSrcPort: sport, SL: uint8(w.AH.SL), StaticRate: uint8(w.AH.StaticRate),
				SrcPathBits: uint8(w.AH.SrcPathBits), DLID: uint16(w.AH.DLID), IsGlobal: w.AH.IsGlobal != 0,
				SGIDIndex: uint8(w.AH.SGIDIndex), FlowLabel: uint32(w.AH.FlowLabel), HopLimit: uint8(w.AH.HopLimit),
				TrafficClass: uint8(w.AH.TrafficClass), DMAC: port.dmac}
			copy(p.DGID[:], w.AH.DGID)
			a := buildAV(p)
			o.AH = new(uverbs.AH)
			r.ahs[o.AH] = &a
		}
	}
	return out
}

func (r *rig) sqBytes() []byte { return r.qpBuf[r.lay.sqOffset:] }

func checkWCs(t *testing.T, name string, want []vWC, got []uverbs.WC) {
	t.Helper()
	require.Len(t, got, len(want), name)
	for i, w := range want {
		g := got[i]
		exp := uverbs.WC{WRID: uint64(w.WRID), Status: uverbs.WCStatus(w.Status), Opcode: uverbs.WCOpcode(w.Opcode),
			VendorErr: uint32(w.VendorErr), ByteLen: uint32(w.ByteLen), Imm: be32(uint32(w.ImmRaw)), QPN: uint32(w.QPN),
			SrcQP: uint32(w.SrcQP), Flags: uverbs.WCFlags(w.Flags), PkeyIndex: uint16(w.Pkey), SLID: uint16(w.SLID),
			SL: uint8(w.SL), DLIDPathBits: uint8(w.DLIDPath)}
		require.Equal(t, exp, g, "%s: wc %d", name, i)
	}
}

// pollCase writes the case's CQEs, polls and checks the WCs and the CQ
// doorbell record.
func pollCase(t *testing.T, c *cqRing, cqBuf []byte, v *vCompletion) []uverbs.WC {
	t.Helper()
	for _, e := range v.CQEs {
		require.Equal(t, uint64(e.CI)&uint64(c.ncqe-1), uint64(e.Slot), v.Name)
		copy(cqBuf[int(e.Slot)*64:], e.CQE64)
	}
	wc := make([]uverbs.WC, int(v.PollMax))
	n, err := c.poll(wc)
	require.NoError(t, err, v.Name)
	require.Equal(t, int(v.PollRet), n, v.Name)
	checkWCs(t, v.Name, v.WCs, wc[:n])
	require.Equal(t, hex.EncodeToString(v.DBAfter.Bytes), hex.EncodeToString((*[8]byte)(unsafe.Pointer(c.dbrec))[:]), "%s: CQ doorbell record", v.Name)
	return wc[:n]
}

// portInfo is what the provider learns about the vectors' port: the link
// layer (context.json), each GID's type (QUERY_GID_ENTRY responses in
// commands.jsonl) and, on RoCE, the dmac CREATE_AH returned. Nothing here
// assumes RoCE: an InfiniBand-port vector set yields eth=false and no dmac.
type portInfo struct {
	eth     bool
	gidType map[uint32]uint32
	dmac    [6]byte
}

func vectorPort(t *testing.T) portInfo {
	var ctx struct {
		Port1 struct {
			LinkLayer num `json:"link_layer"`
		} `json:"port1"`
	}
	loadJSON(t, "context.json", &ctx)
	p := portInfo{eth: ctx.Port1.LinkLayer == num(uverbs.LinkLayerEthernet), gidType: map[uint32]uint32{}}
	for _, e := range commandEvents(t) {
		if e.Kind != "ioctl" || e.Errno != 0 {
			continue
		}
		for _, a := range e.After {
			switch {
			case e.Name == "QUERY_GID_ENTRY" && a.ID == "0x0003" && len(a.Out) >= 28:
				var g abi.GIDEntry
				copy((*[32]byte)(unsafe.Pointer(&g))[:], a.Out)
				p.gidType[g.GIDIndex] = g.GIDType
			case e.Name == "CREATE_AH" && a.ID == "0x1001" && len(a.Out) >= 10:
				var resp abi.Mlx5CreateAHResp
				copy((*[16]byte)(unsafe.Pointer(&resp))[:], a.Out)
				p.dmac = resp.DMAC
			}
		}
	}
	return p
}

type cmdAttr struct {
	ID      string   `json:"id"`
	Len     num      `json:"len"`
	Payload hexBytes `json:"payload"`
	Inline  hexBytes `json:"payload_inline"`
	Out     hexBytes `json:"out_bytes"`
}

type cmdEvent struct {
	Kind   string    `json:"kind"`
	Text   string    `json:"text"`
	Name   string    `json:"name"`
	Errno  int       `json:"errno"`
	Before []cmdAttr `json:"attrs_before"`
	After  []cmdAttr `json:"attrs_after"`
}

func commandEvents(t testing.TB) []cmdEvent {
	f, err := os.Open(filepath.Join(vectorDir(t), "commands.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var evs []cmdEvent
	for sc.Scan() {
		var e cmdEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		evs = append(evs, e)
	}
	require.NoError(t, sc.Err())
	return evs
}

func errnoOf(err error) uint64 {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return uint64(e)
	}
	return 1 << 32
}

func memPtr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

func unsafeAdd(p unsafe.Pointer, off int) unsafe.Pointer { return unsafe.Add(p, off) }
