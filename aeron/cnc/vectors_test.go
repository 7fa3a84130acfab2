package cnc

import (
	"strings"
	"testing"
	"time"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/internal/shm"
	"github.com/stretchr/testify/require"
)

const channel = "aeron:udp?endpoint=localhost:20121|term-length=64k"

func vectorFile(t *testing.T) *File {
	t.Helper()
	f, err := Wrap(testvec.Copy(testvec.CnC, shm.Alloc))
	require.NoError(t, err)
	return f
}

func TestCnCVectorHeader(t *testing.T) {
	f := vectorFile(t)
	require.Equal(t, SemanticVersion(512), f.Version())
	require.Equal(t, "0.2.0", f.Version().String())
	require.Len(t, f.ToDriverBuffer(), 1049344)
	require.Len(t, f.ToClientsBuffer(), 1048704)
	require.Len(t, f.CountersMetadataBuffer(), 4194304)
	require.Len(t, f.CountersValuesBuffer(), 1048576)
	require.Len(t, f.ErrorLogBuffer(), 1048576)
	require.Equal(t, 10*time.Second, f.ClientLivenessTimeout())
	require.Equal(t, int64(1796215460721), f.StartTimestamp())
	require.Equal(t, int64(30052), f.PID())
	require.Zero(t, f.FilePageSize(), "1.48 has no file_page_size")
	at := func(off int, b []byte) bool { return &f.Bytes()[off] == &b[0] }
	require.True(t, at(128, f.ToDriverBuffer()))
	require.True(t, at(1049472, f.ToClientsBuffer()))
	require.True(t, at(2098176, f.CountersMetadataBuffer()))
	require.True(t, at(6292480, f.CountersValuesBuffer()))
	require.True(t, at(7341056, f.ErrorLogBuffer()))
	require.Len(t, f.Bytes(), 8392704)
}

func TestCnCVectorCounters(t *testing.T) {
	f := vectorFile(t)
	r, err := f.Counters()
	require.NoError(t, err)
	require.Equal(t, int32(8191), r.MaxCounterID())
	var all []Counter
	r.ForEach(func(c Counter) bool { all = append(all, c); return true })
	require.Len(t, all, 56)
	for i, label := range SystemCounterLabels {
		c := all[i]
		require.Equal(t, int32(i), c.ID)
		require.Equal(t, int32(TypeSystem), c.TypeID)
		require.True(t, strings.HasPrefix(c.Label, label), "counter %d: %q does not start with %q", i, c.Label, label)
		require.Equal(t, int32(i), int32(le.Uint32(c.Key)), "system counter keys hold their id")
	}
	want := map[int32]struct {
		typeID     int32
		value      int64
		reg, owner int64
		label      string
	}{
		0:  {TypeSystem, 3024064, 0, 0, "Bytes sent"},
		5:  {TypeSystem, 49, 0, 0, "NAKs sent"},
		7:  {TypeSystem, 694, 0, 0, "Status Messages sent"},
		15: {TypeSystem, 0, 0, 0, "Errors: version=1.48.0-SNAPSHOT commit=+guilty"},
		18: {TypeSystem, 599, 0, 0, "Sender flow control limits, i.e. back-pressure events"},
		34: {TypeSystem, 77824, 0, 0, "Aeron software: version=1.48.0-SNAPSHOT commit=+guilty"},
		40: {TypeClientHeartbeatTimestamp, 1796215463917, 1, 1, "client-heartbeat: id=1 name= version=1.48.0-SNAPSHOT commit=+guilty"},
		41: {TypeSendChannelStatus, ChannelStatusActive, 2, 0, "snd-channel: " + channel + " 127.0.0.1:47945"},
		42: {TypeLocalSockAddr, ChannelStatusActive, 2, 0, "snd-local-sockaddr: 41 127.0.0.1:47945"},
		43: {TypePublisherPosition, 3055840, 2, 0, "pub-pos (sampled): 2 994871370 1001 " + channel + " "},
		44: {TypePublisherLimit, 3062688, 2, 1, "pub-lmt: 2 994871370 1001 " + channel + " "},
		45: {TypeSenderPosition, 3029920, 2, 0, "snd-pos: 2 994871370 1001 " + channel + " "},
		46: {TypeSenderLimit, 3030048, 2, 0, "snd-lmt: 2 994871370 1001 " + channel + " "},
		47: {TypeSenderBPE, 599, 2, 0, "snd-bpe: 2 994871370 1001 " + channel + " "},
		51: {TypePerImage, 146186, 5, 0, "rcv-cc-cubic-rtt: 5 994871370 1001 aeron:udp?endpoint=localhost:20121|cc=cubic "},
		53: {TypeReceiverHWM, 3029920, 5, 0, "rcv-hwm: 5 994871370 1001 aeron:udp?endpoint=localhost:20121|cc=cubic "},
		54: {TypeReceiverPosition, 3029920, 5, 0, "rcv-pos: 5 994871370 1001 aeron:udp?endpoint=localhost:20121|cc=cubic "},
		55: {TypeSubscriberPosition, 3029920, 4, 3, "sub-pos: 4 994871370 1001 aeron:udp?endpoint=localhost:20121|cc=cubic @0"},
	}
	for id, w := range want {
		c := all[id]
		require.Equal(t, w.typeID, c.TypeID, "counter %d", id)
		require.Equal(t, w.value, c.Value, "counter %d", id)
		require.Equal(t, w.reg, c.RegistrationID, "counter %d", id)
		require.Equal(t, w.owner, c.OwnerID, "counter %d", id)
		require.Equal(t, w.label, c.Label, "counter %d", id)
	}
	require.Equal(t, int64(5), all[55].ReferenceID, "sub-pos references its image")
	// Stream position key: registration id, session, stream, channel.
	k := all[44].Key
	require.Equal(t, int64(2), int64(le.Uint64(k)))
	require.Equal(t, int32(994871370), int32(le.Uint32(k[8:])))
	require.Equal(t, int32(1001), int32(le.Uint32(k[12:])))
	require.Equal(t, int32(50), int32(le.Uint32(k[16:])))
	require.Equal(t, channel, string(k[20:20+50]))
	require.Equal(t, int32(44), r.FindByTypeIDAndRegistrationID(TypePublisherLimit, 2))
	require.Equal(t, int32(NullCounterID), r.FindByTypeIDAndRegistrationID(TypePublisherLimit, 99))
	require.Equal(t, int32(RecordUnused), r.CounterState(56))
	require.Equal(t, int64(NotFreeToReuse), r.FreeForReuseDeadline(0))
}

func TestCnCVectorRingBuffers(t *testing.T) {
	f := vectorFile(t)
	rb, err := f.ToDriver()
	require.NoError(t, err)
	require.Equal(t, 1<<20, rb.Capacity())
	require.Equal(t, int64(176), rb.ProducerPosition())
	require.Equal(t, int64(176), rb.ConsumerPosition())
	require.Zero(t, rb.Size())
	require.Equal(t, int64(1796215463729), rb.ConsumerHeartbeatTime())
	require.Equal(t, int64(1796215463729), f.DriverHeartbeat())
	n, err := rb.Read(func(int32, []byte) { t.Fatal("the driver consumed every command") }, 10)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, int64(6), rb.NextCorrelationID(), "five correlation ids were minted")

	// The broadcast buffer still holds the driver's five responses.
	rcv, err := NewBroadcastReceiver(f.ToClientsBuffer())
	require.NoError(t, err)
	rcv.nextRecord = 0 // replay from the start of the buffer
	type rec struct {
		typeID int32
		body   []byte
	}
	var recs []rec
	c := NewCopyBroadcastReceiver(rcv)
	for {
		n, err := c.Receive(func(typeID int32, msg []byte) { recs = append(recs, rec{typeID, append([]byte(nil), msg...)}) })
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	require.Len(t, recs, 5)
	names := []string{}
	for _, r := range recs {
		names = append(names, MessageName(r.typeID))
	}
	require.Equal(t, []string{"ON_COUNTER_READY", "ON_PUBLICATION_READY", "ON_COUNTER_READY", "ON_SUBSCRIPTION_READY", "ON_AVAILABLE_IMAGE"}, names)
	// ON_COUNTER_READY: correlation id 1, counter 40 (client-heartbeat).
	require.Equal(t, int64(1), int64(le.Uint64(recs[0].body)))
	require.Equal(t, int32(40), int32(le.Uint32(recs[0].body[8:])))
	// ON_PUBLICATION_READY: correlation 2, registration 2, session, stream,
	// pub-lmt counter 44, channel status 41, log file name.
	p := recs[1].body
	require.Equal(t, int64(2), int64(le.Uint64(p)))
	require.Equal(t, int64(2), int64(le.Uint64(p[8:])))
	require.Equal(t, int32(994871370), int32(le.Uint32(p[16:])))
	require.Equal(t, int32(1001), int32(le.Uint32(p[20:])))
	require.Equal(t, int32(44), int32(le.Uint32(p[24:])))
	require.Equal(t, int32(41), int32(le.Uint32(p[28:])))
	nameLen := int(le.Uint32(p[32:]))
	require.Equal(t, "/dev/shm/aeron-cap/publications/2.logbuffer", string(p[36:36+nameLen]))
	// ON_AVAILABLE_IMAGE: the source identity follows the log file name at
	// a 4-aligned offset.
	a := recs[4].body
	require.Equal(t, int64(5), int64(le.Uint64(a)))
	require.Equal(t, int64(4), int64(le.Uint64(a[16:])))
	require.Equal(t, int32(55), int32(le.Uint32(a[24:])))
	ln := int(le.Uint32(a[28:]))
	require.Equal(t, "/dev/shm/aeron-cap/images/5.logbuffer", string(a[32:32+ln]))
	so := (32 + ln + 3) &^ 3
	sl := int(le.Uint32(a[so:]))
	require.Equal(t, "127.0.0.1:47945", string(a[so+4:so+4+sl]))

	// A new receiver starts at the latest record.
	fresh, err := NewBroadcastReceiver(f.ToClientsBuffer())
	require.NoError(t, err)
	ok, err := fresh.ReceiveNext()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int32(RspOnAvailableImage), fresh.TypeID())
	require.Equal(t, 91, fresh.Length())
	require.Equal(t, 160+8, fresh.Offset())
	ok, err = fresh.ReceiveNext()
	require.NoError(t, err)
	require.False(t, ok)

	n, err = ReadErrorLog(f.ErrorLogBuffer(), 0, func(Observation) { t.Fatal("the run logged no errors") })
	require.NoError(t, err)
	require.Zero(t, n)
}
