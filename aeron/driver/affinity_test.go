//go:build linux

package driver

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/internal/sys"
)

// TestAgentCPUAffinity (issue 34): with AERON_*_CPU_AFFINITY each agent's
// goroutine runs on an OS thread of its own restricted to the CPU asked
// for, in each threading mode with the C driver's role mapping (SHARED
// takes the conductor's CPU, SHARED_NETWORK's network agents the
// sender's); an agent without one is not pinned.
func TestAgentCPUAffinity(t *testing.T) {
	last := runtime.NumCPU() - 1
	for _, tc := range []struct {
		mode ThreadingMode
		want []int // the CPUs the pinned threads report, in any order
	}{
		{Dedicated, []int{0, last, last}},
		{SharedNetwork, []int{0, last}},
		{Shared, []int{0}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			var mu sync.Mutex
			var got []int
			hook := func(cpu int) {
				cpus, err := sys.ThreadCPUs()
				require.NoError(t, err)
				require.Equal(t, []int{cpu}, cpus, "the pinned thread's CPUs")
				mu.Lock()
				got = append(got, cpu)
				mu.Unlock()
			}
			agentPinned.Store(&hook)
			defer agentPinned.Store(nil)
			start(t, func(c *Config) {
				c.ThreadingMode = tc.mode
				c.ConductorCPU, c.SenderCPU, c.ReceiverCPU = 0, last, last
			})
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) == len(tc.want)
			}, 5*time.Second, time.Millisecond)
			mu.Lock()
			require.ElementsMatch(t, tc.want, got)
			mu.Unlock()
		})
	}
	t.Run("none", func(t *testing.T) {
		calls := 0
		hook := func(int) { calls++ }
		agentPinned.Store(&hook)
		defer agentPinned.Store(nil)
		d := start(t, nil)
		require.NoError(t, d.Close())
		require.Zero(t, calls, "no affinity asked: nothing pinned")
	})
}

// TestAgentCPUAffinityRefused: a CPU the machine does not have is refused
// by the kernel; as in the C driver the agent runs on, unpinned, and the
// error log says so.
func TestAgentCPUAffinityRefused(t *testing.T) {
	d := start(t, func(c *Config) { c.ConductorCPU = 255 })
	var texts []string
	require.Eventually(t, func() bool {
		texts = texts[:0]
		_, err := cnc.ReadErrorLog(d.cnc.ErrorLogBuffer(), 0, func(o cnc.Observation) { texts = append(texts, o.Text) })
		require.NoError(t, err)
		return len(texts) > 0
	}, 5*time.Second, time.Millisecond)
	require.True(t, strings.HasPrefix(texts[0], "WARNING: unable to apply affinity: role_name=conductor: "), texts[0])
}

func TestAffinityAndIdleArgsFromEnv(t *testing.T) {
	env := map[string]string{
		"AERON_CONDUCTOR_CPU_AFFINITY":                "1",
		"AERON_SENDER_CPU_AFFINITY":                   "2",
		"AERON_RECEIVER_CPU_AFFINITY":                 "-1",
		"AERON_SENDER_IDLE_STRATEGY":                  "backoff",
		"AERON_SENDER_IDLE_STRATEGY_INIT_ARGS":        "5-6-2us-3ms",
		"AERON_RECEIVER_IDLE_STRATEGY":                "sleep-ns",
		"AERON_RECEIVER_IDLE_STRATEGY_INIT_ARGS":      "10us",
		"AERON_CONDUCTOR_IDLE_STRATEGY_INIT_ARGS":     "1-2-1us-1us",
		"AERON_SHAREDNETWORK_IDLE_STRATEGY_INIT_ARGS": "",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, [3]int{1, 2, -1}, [3]int{c.ConductorCPU, c.SenderCPU, c.ReceiverCPU})
	s, err := NewIdleStrategyArgs(c.SenderIdle, c.SenderIdleArgs)
	require.NoError(t, err)
	require.Equal(t, &backoffIdle{maxSpins: 5, maxYields: 6, minPark: 2 * time.Microsecond, maxPark: 3 * time.Millisecond}, s)
	s, err = NewIdleStrategyArgs(c.ReceiverIdle, c.ReceiverIdleArgs)
	require.NoError(t, err)
	require.Equal(t, sleepIdle(10*time.Microsecond), s)
	d, err := NewIdleStrategyArgs("backoff", "")
	require.NoError(t, err)
	require.Equal(t, &backoffIdle{maxSpins: 10, maxYields: 20, minPark: time.Microsecond, maxPark: time.Millisecond}, d, "C's defaults")

	for _, bad := range []map[string]string{
		{"AERON_CONDUCTOR_CPU_AFFINITY": "256"},
		{"AERON_SENDER_CPU_AFFINITY": "x"},
		{"AERON_CONDUCTOR_IDLE_STRATEGY_INIT_ARGS": "1-2-3"},
		{"AERON_CONDUCTOR_IDLE_STRATEGY_INIT_ARGS": "1-2-1ms-1us"},
		{"AERON_RECEIVER_IDLE_STRATEGY": "sleep-ns", "AERON_RECEIVER_IDLE_STRATEGY_INIT_ARGS": "soon"},
	} {
		c, err := ConfigFromEnv(func(k string) string { return bad[k] })
		if err == nil {
			err = c.Validate()
		}
		require.Error(t, err, "%v", bad)
	}
}
