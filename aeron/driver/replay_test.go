package driver

import (
	"bufio"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// testdata/c-client-1.53-commands.txt holds every command Aeron's C client
// (1.53.0-SNAPSHOT) wrote into the to-driver ring buffer of an ibgo driver
// while basic_subscriber, basic_publisher, cpong and cping ran, recorded
// with `ibgo driver --record-commands`. Replaying them into a fresh driver
// must give each its ready response, no error, and leave no client behind.
func TestReplayCClientCommands(t *testing.T) {
	f, err := os.Open("testdata/c-client-1.53-commands.txt")
	require.NoError(t, err)
	defer f.Close()
	type cmd struct {
		typeID int32
		msg    []byte
	}
	var cmds []cmd
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		typ, data, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, sc.Text())
		id, err := strconv.ParseInt(typ, 16, 32)
		require.NoError(t, err)
		msg, err := hex.DecodeString(data)
		require.NoError(t, err)
		cmds = append(cmds, cmd{int32(id), msg})
	}
	require.NotEmpty(t, cmds)

	d := start(t, func(c *Config) { c.PublicationLingerTimeout = 10 * time.Millisecond })
	file, err := cnc.OpenFile(cnc.Path(d.Dir()), true)
	require.NoError(t, err)
	defer file.Close()
	rb, err := file.ToDriver()
	require.NoError(t, err)
	br, err := cnc.NewBroadcastReceiver(file.ToClientsBuffer())
	require.NoError(t, err)
	rx := cnc.NewCopyBroadcastReceiver(br)
	counters, err := file.Counters()
	require.NoError(t, err)

	want := map[int32]int32{cnc.CmdAddPublication: cnc.RspOnPublicationReady,
		cnc.CmdAddExclusivePublication: cnc.RspOnExclusivePublicationReady, cnc.CmdAddSubscription: cnc.RspOnSubscriptionReady}
	for _, c := range cmds {
		hdr, err := cnc.DecodeCorrelated(c.typeID, c.msg)
		require.NoError(t, err)
		require.NoError(t, rb.Write(c.typeID, c.msg))
		rsp, ok := want[c.typeID]
		if !ok {
			continue
		}
		deadline := time.Now().Add(30 * time.Second)
		for got := false; !got; {
			require.True(t, time.Now().Before(deadline), "no %s for %s correlation %d", cnc.MessageName(rsp), cnc.MessageName(c.typeID), hdr.CorrelationID)
			_, err := rx.Receive(func(typeID int32, msg []byte) {
				require.NotEqual(t, int32(cnc.RspOnError), typeID, "driver answered ON_ERROR to a real client's command")
				if typeID == rsp {
					corr, _, err := cnc.DecodeIDAndCounter(typeID, msg)
					require.NoError(t, err)
					got = corr == hdr.CorrelationID
				}
			})
			require.NoError(t, err)
			if !got {
				time.Sleep(time.Millisecond)
			}
		}
	}
	// Every client closed: their heartbeat counters and resources are gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := 0
		counters.ForEach(func(c cnc.Counter) bool {
			if c.TypeID != cnc.TypeSystem {
				left++
			}
			return true
		})
		if left == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d non-system counters left after every client closed", left)
		time.Sleep(time.Millisecond)
	}
	require.Zero(t, counters.CounterValue(sysErrors))
}
