package driver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
)

// TestDestinationsAnsweredAsTheCDriver: no channel of this driver has
// manual control of destinations, so every destination command gets the
// C driver's answer for such channels: unknown resource (IPC ones are not
// looked at), spies refused, otherwise "does not allow manual control".
func TestDestinationsAnsweredAsTheCDriver(t *testing.T) {
	m := &fakeMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	ctx := context.Background()
	cl, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	defer cl.Close()
	code := func(err error) (client.ErrorCode, string) {
		t.Helper()
		var de *client.DriverError
		require.ErrorAs(t, err, &de)
		return de.Code, de.Message
	}

	ipcPub, err := cl.AddPublication(ctx, "aeron:ipc", 1)
	require.NoError(t, err)
	c, msg := code(ipcPub.AddDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40100"))
	require.Equal(t, client.UnknownPublication, c)
	require.Contains(t, msg, "unknown add destination client_id=")
	c, msg = code(ipcPub.RemoveDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40100"))
	require.Equal(t, client.UnknownPublication, c)
	require.Contains(t, msg, "unknown remove destination, client_id=")

	netPub, err := cl.AddPublication(ctx, "aeron:udp?endpoint=127.0.0.1:40101", 1)
	require.NoError(t, err)
	c, msg = code(netPub.AddDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40102"))
	require.Equal(t, client.GenericError, c)
	require.Equal(t, "channel does not allow manual control of destinations: aeron:udp?endpoint=127.0.0.1:40102", msg)
	c, msg = code(netPub.AddDestination(ctx, "aeron-spy:aeron:udp?endpoint=127.0.0.1:40102"))
	require.Equal(t, client.InvalidChannel, c)
	require.Contains(t, msg, "Aeron spies are invalid as send destinations")
	c, _ = code(netPub.RemoveDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40102"))
	require.Equal(t, client.GenericError, c)

	ipcSub, err := cl.AddSubscription(ctx, "aeron:ipc", 1)
	require.NoError(t, err)
	c, msg = code(ipcSub.AddDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40103"))
	require.Equal(t, client.UnknownSubscription, c)
	require.Contains(t, msg, "unknown subscription client_id=")
	netSub, err := cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:40104", 1)
	require.NoError(t, err)
	c, msg = code(netSub.AddDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40105"))
	require.Equal(t, client.InvalidChannel, c)
	require.Equal(t, "channel does not allow manual control", msg)
	c, _ = code(netSub.RemoveDestination(ctx, "aeron:udp?endpoint=127.0.0.1:40105"))
	require.Equal(t, client.InvalidChannel, c)

	// The driver keeps serving.
	_, err = cl.AddPublication(ctx, "aeron:ipc", 2)
	require.NoError(t, err)
}
