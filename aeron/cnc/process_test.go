package cnc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	producerEnv      = "IBGO_TEST_CNC_PRODUCER"
	processMsgs      = 20000
	processProducers = 3
)

// TestRingBufferProducerProcesses runs producers in separate processes, as
// Aeron clients are, writing into one mapped cnc.dat while this process
// reads as the driver does: the claim (CAS on the tail in shared memory)
// and commit protocol must hold across address spaces.
func TestRingBufferProducerProcesses(t *testing.T) {
	if os.Getenv(producerEnv) != "" {
		t.Skip("running as a producer")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), FileName)
	l := smallLayout()
	f, err := Create(path, l)
	require.NoError(t, err)
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)

	var procs []*exec.Cmd
	for p := 0; p < processProducers; p++ {
		cmd := exec.Command(exe, "-test.run=^TestRingBufferProducerChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", producerEnv, path, p))
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		procs = append(procs, cmd)
	}
	next := make([]int, processProducers)
	total := 0
	deadline := time.Now().Add(2 * time.Minute)
	for total < processProducers*processMsgs {
		require.True(t, time.Now().Before(deadline), "only %d messages after 2 minutes", total)
		n, err := rb.Read(func(typeID int32, b []byte) {
			p := int(le.Uint32(b))
			i := int(le.Uint32(b[4:]))
			if p >= processProducers || typeID != int32(200+p) || i != next[p] || len(b) != 8+p*13 {
				t.Fatalf("process %d message %d (want %d), type %d, %d bytes", p, i, next[p], typeID, len(b))
			}
			next[p]++
			total++
		}, 100)
		require.NoError(t, err)
		if n == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	for _, c := range procs {
		require.NoError(t, c.Wait())
	}
	require.Equal(t, []int{processMsgs, processMsgs, processMsgs}, next)
}

// TestRingBufferProducerChild is the producer side of the test above; it
// does nothing unless started by it.
func TestRingBufferProducerChild(t *testing.T) {
	spec := os.Getenv(producerEnv)
	if spec == "" {
		t.Skip("only runs as a child of TestRingBufferProducerProcesses")
	}
	var path string
	var p int
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] == ',' {
			path = spec[:i]
			p, _ = strconv.Atoi(spec[i+1:])
			break
		}
	}
	f, err := OpenFile(path, true)
	require.NoError(t, err)
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)
	msg := make([]byte, 8+p*13)
	for i := 0; i < processMsgs; {
		le.PutUint32(msg, uint32(p))
		le.PutUint32(msg[4:], uint32(i))
		err := rb.Write(int32(200+p), msg)
		if errors.Is(err, ErrInsufficientCapacity) {
			time.Sleep(20 * time.Microsecond)
			continue
		}
		require.NoError(t, err)
		i++
	}
}
