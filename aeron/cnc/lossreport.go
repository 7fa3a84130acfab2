package cnc

import (
	"fmt"
	"path/filepath"

	"github.com/ibgo/ibgo/internal/shm"
)

// Loss report layout (aeron_loss_reporter_entry_t, Java LossReport): a
// 40-byte entry header, the channel (int32 length + ASCII, padded to 4),
// the source (int32 length + ASCII); entries aligned to 64.
const (
	LossReportEntryAlignment = 64
	lrObservationCountOffset = 0
	lrTotalBytesLostOffset   = 8
	lrFirstObservationOffset = 16
	lrLastObservationOffset  = 24
	lrSessionIDOffset        = 32
	lrStreamIDOffset         = 36
	lrChannelOffset          = 40
)

// LossReportCSVHeader is the header line LossStat prints.
const LossReportCSVHeader = "#OBSERVATION_COUNT,TOTAL_BYTES_LOST,FIRST_OBSERVATION,LAST_OBSERVATION,SESSION_ID,STREAM_ID,CHANNEL,SOURCE"

// LossEntry is one stream's loss record.
type LossEntry struct {
	ObservationCount int64
	TotalBytesLost   int64
	FirstObservation int64 // epoch ms
	LastObservation  int64 // epoch ms
	SessionID        int32
	StreamID         int32
	Channel          string
	Source           string
}

// ReadLossReport calls fn for each entry (mirrors aeron_loss_reporter_read,
// with the source located as the writer lays it out).
func ReadLossReport(b []byte, fn func(LossEntry)) (int, error) {
	if !shm.Aligned(b, 8) {
		return 0, invalid("read loss report", "buffer not 8-byte aligned")
	}
	n := 0
	for off := 0; off+lrChannelOffset+4 <= len(b); {
		count := shm.LoadInt64(b, off+lrObservationCountOffset)
		if count <= 0 {
			break
		}
		fail := func(what string, l int) (int, error) {
			return n, corrupt("read loss report", int64(off), "%s length %d does not fit the entry", what, l)
		}
		cl := int(int32(le.Uint32(b[off+lrChannelOffset:])))
		if cl < 0 || off+lrChannelOffset+4+cl > len(b) {
			return fail("channel", cl)
		}
		srcOff := off + lrChannelOffset + align4(4+cl)
		if srcOff+4 > len(b) {
			return fail("channel", cl)
		}
		sl := int(int32(le.Uint32(b[srcOff:])))
		if sl < 0 || srcOff+4+sl > len(b) {
			return fail("source", sl)
		}
		n++
		fn(LossEntry{
			ObservationCount: count,
			TotalBytesLost:   shm.LoadInt64(b, off+lrTotalBytesLostOffset),
			FirstObservation: int64(le.Uint64(b[off+lrFirstObservationOffset:])),
			LastObservation:  shm.LoadInt64(b, off+lrLastObservationOffset),
			SessionID:        int32(le.Uint32(b[off+lrSessionIDOffset:])),
			StreamID:         int32(le.Uint32(b[off+lrStreamIDOffset:])),
			Channel:          string(b[off+lrChannelOffset+4 : off+lrChannelOffset+4+cl]),
			Source:           string(b[srcOff+4 : srcOff+4+sl]),
		})
		off += alignTo(srcOff+4+sl-off, LossReportEntryAlignment)
	}
	return n, nil
}

func align4(n int) int             { return (n + 3) &^ 3 }
func alignTo(n, alignment int) int { return (n + alignment - 1) &^ (alignment - 1) }

// LossReport writes loss-report.dat entries (aeron_loss_reporter.c). It is
// used by one receiver thread.
type LossReport struct {
	buf  []byte
	next int
}

// NewLossReport writes into b (zeroed).
func NewLossReport(b []byte) (*LossReport, error) {
	if !shm.Aligned(b, 8) {
		return nil, invalid("loss report", "buffer not 8-byte aligned")
	}
	return &LossReport{buf: b}, nil
}

// CreateEntry adds an entry with a first observation and returns its offset.
func (r *LossReport) CreateEntry(initialBytesLost, timestampMs int64, sessionID, streamID int32, channel, source string) (int, error) {
	required := lrChannelOffset + align4(4+len(channel)) + 4 + len(source)
	if required > len(r.buf)-r.next {
		return -1, fmt.Errorf("could not create loss report entry: %w", ErrInsufficientCapacity)
	}
	off := r.next
	b := r.buf
	shm.StoreInt64(b, off+lrTotalBytesLostOffset, initialBytesLost)
	le.PutUint64(b[off+lrFirstObservationOffset:], uint64(timestampMs))
	shm.StoreInt64(b, off+lrLastObservationOffset, timestampMs)
	le.PutUint32(b[off+lrSessionIDOffset:], uint32(sessionID))
	le.PutUint32(b[off+lrStreamIDOffset:], uint32(streamID))
	le.PutUint32(b[off+lrChannelOffset:], uint32(len(channel)))
	copy(b[off+lrChannelOffset+4:], channel)
	srcOff := off + lrChannelOffset + align4(4+len(channel))
	le.PutUint32(b[srcOff:], uint32(len(source)))
	copy(b[srcOff+4:], source)
	shm.StoreInt64(b, off+lrObservationCountOffset, 1)
	r.next += alignTo(required, LossReportEntryAlignment)
	return off, nil
}

// RecordObservation adds a loss to an existing entry.
func (r *LossReport) RecordObservation(offset int, bytesLost, timestampMs int64) {
	if offset < 0 || offset+lrChannelOffset > len(r.buf) {
		return
	}
	shm.StoreInt64(r.buf, offset+lrLastObservationOffset, timestampMs)
	shm.AddInt64(r.buf, offset+lrTotalBytesLostOffset, bytesLost)
	shm.AddInt64(r.buf, offset+lrObservationCountOffset, 1)
}

// LossReportPath is the loss report's path in an Aeron directory.
func LossReportPath(dir string) string { return filepath.Join(dir, LossReportFileName) }
