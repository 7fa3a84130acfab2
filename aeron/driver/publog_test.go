package driver

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// TestCleanLogWritesFirstWordLast: every log cleaner (IPC publication,
// network publication, image) zeroes a range's first word after the rest
// of the range and only then; a reader that sees a zero frame length must
// find the frame behind it zero too. The recording store checks, at the
// moment the first word is written, that it still holds the old frame
// and that everything after it in the range is already zero.
func TestCleanLogWritesFirstWordLast(t *testing.T) {
	const termLength = 64 << 10
	bits := logbuffer.PositionBitsToShift(termLength)
	cleaners := map[string]func(log *logbuffer.LogBuffer, position int64){
		"ipc publication": func(log *logbuffer.LogBuffer, position int64) {
			p := &ipcPublication{log: log, termLength: termLength, positionBitsToShift: bits}
			p.clean(position)
			require.Equal(t, position, p.cleanPosition)
		},
		"network publication": func(log *logbuffer.LogBuffer, position int64) {
			p := &networkPublication{log: log, termLength: termLength, positionBitsToShift: bits}
			p.clean(position)
			require.Equal(t, position, p.cleanPosition)
		},
		"image": func(log *logbuffer.LogBuffer, position int64) {
			im := &publicationImage{log: log, termLength: termLength, positionBitsToShift: bits}
			im.clean(position)
			require.Equal(t, position, im.cleanPosition)
			require.Equal(t, position, im.cleaned.Load())
		},
	}
	// one whole term, then part of the next: two ranges
	const position = termLength + 4096
	type rng struct{ term, off, n int }
	want := []rng{{0, 0, termLength}, {1, 0, 4096}}
	for name, clean := range cleaners {
		t.Run(name, func(t *testing.T) {
			log, err := logbuffer.Create(filepath.Join(t.TempDir(), "log"), termLength, 4096)
			require.NoError(t, err)
			defer log.Close()
			for i := 0; i < logbuffer.PartitionCount; i++ {
				term := log.Term(i)
				for j := range term {
					term[j] = 0xA5
				}
			}
			var got []rng
			saved := storeFirstWord
			defer func() { storeFirstWord = saved }()
			storeFirstWord = func(b []byte, off int, v int64) {
				require.Less(t, len(got), len(want), "more ranges than expected")
				w := want[len(got)]
				require.Same(t, &log.Term(w.term)[0], &b[0], "range %d is in term %d", len(got), w.term)
				require.Equal(t, w.off, off)
				require.Zero(t, v)
				require.Equal(t, uint64(0xA5A5A5A5A5A5A5A5), binary.LittleEndian.Uint64(b[off:]),
					"the first word of range %d is still the old frame when it is written", len(got))
				for j := off + 8; j < off+w.n; j++ {
					if b[j] != 0 {
						t.Fatalf("range %d: byte %d is not zero yet when the first word is written", len(got), j)
					}
				}
				got = append(got, rng{w.term, off, w.n})
				saved(b, off, v)
			}
			clean(log, position)
			require.Equal(t, want, got, "every range's first word is written through the store")
			for _, w := range want {
				term := log.Term(w.term)
				for j := w.off; j < w.off+w.n; j++ {
					if term[j] != 0 {
						t.Fatalf("term %d byte %d not cleaned", w.term, j)
					}
				}
			}
			require.Equal(t, byte(0xA5), log.Term(1)[4096], "nothing past the position is cleaned")
			require.Equal(t, byte(0xA5), log.Term(2)[0])
		})
	}
}
