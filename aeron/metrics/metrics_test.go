package metrics

import (
	"compress/gzip"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/internal/shm"
)

// scrape fetches /metrics over HTTP and parses it with Prometheus's own
// text parser.
func scrape(t *testing.T, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(Handler(c))
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value returns the value of the one sample of name whose labels include
// want, failing when there is not exactly one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "no metric %s; have %v", name, names(fams))
	var hits []float64
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			hits = append(hits, m.Counter.GetValue())
		case m.Gauge != nil:
			hits = append(hits, m.Gauge.GetValue())
		case m.Untyped != nil:
			hits = append(hits, m.Untyped.GetValue())
		}
	}
	require.Len(t, hits, 1, "%s%v in %v", name, want, f)
	return hits[0]
}

func names(fams map[string]*dto.MetricFamily) []string {
	var ns []string
	for n := range fams {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// TestVectorCnC scrapes the cnc.dat Aeron 1.48's C driver wrote
// (vectors/aeron, one UDP publication and subscription with loss).
func TestVectorCnC(t *testing.T) {
	dir := t.TempDir()
	in, err := os.Open("../internal/testvec/testdata/cnc.dat.gz")
	require.NoError(t, err)
	defer in.Close()
	zr, err := gzip.NewReader(in)
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cnc.Path(dir), b, 0o644))

	c := NewCollector(dir)
	c.OnError = func(err error) { t.Errorf("scrape error: %v", err) }
	fams := scrape(t, c)
	require.Equal(t, 1.0, value(t, fams, "aeron_driver_up", nil))
	require.Equal(t, 3024064.0, value(t, fams, "aeron_bytes_sent_total", nil))
	require.Equal(t, dto.MetricType_COUNTER, fams["aeron_bytes_sent_total"].GetType())
	require.Equal(t, 3098240.0, value(t, fams, "aeron_bytes_received_total", nil))
	require.Equal(t, 49.0, value(t, fams, "aeron_naks_sent_total", nil))
	require.Equal(t, 599.0, value(t, fams, "aeron_sender_flow_control_limits_total", nil))
	require.InDelta(t, 0.011757149, value(t, fams, "aeron_conductor_max_cycle_time_seconds", nil), 1e-12)
	require.Equal(t, dto.MetricType_GAUGE, fams["aeron_conductor_max_cycle_time_seconds"].GetType())
	require.Equal(t, 9842688.0, value(t, fams, "aeron_bytes_mapped", nil))
	require.Equal(t, 1.0, value(t, fams, "aeron_driver_build_info", map[string]string{"version": "1.48.0-SNAPSHOT", "commit": "+guilty"}))
	require.Equal(t, 2.0, value(t, fams, "aeron_clients", nil))
	require.Equal(t, 1.0, value(t, fams, "aeron_cnc_info", map[string]string{"cnc_version": "0.2.0", "pid": "30052"}))

	pub := "aeron:udp?endpoint=localhost:20121|term-length=64k"
	sub := "aeron:udp?endpoint=localhost:20121|cc=cubic"
	for _, tc := range []struct {
		typ, channel, reg string
		v                 float64
	}{
		{"pub-lmt", pub, "2", 3062688},
		{"pub-pos", pub, "2", 3055840},
		{"snd-pos", pub, "2", 3029920},
		{"snd-lmt", pub, "2", 3030048},
		{"rcv-hwm", sub, "5", 3029920},
		{"rcv-pos", sub, "5", 3029920},
		{"sub-pos", sub, "4", 3029920},
	} {
		require.Equal(t, tc.v, value(t, fams, "aeron_stream_position_bytes", map[string]string{
			"type": tc.typ, "session_id": "994871370", "stream_id": "1001", "channel": tc.channel, "registration_id": tc.reg}), tc.typ)
	}
	require.Len(t, fams["aeron_stream_position_bytes"].Metric, 7)
	require.Equal(t, 599.0, value(t, fams, "aeron_stream_back_pressure_events_total", map[string]string{"session_id": "994871370"}))
	require.Equal(t, 1.0, value(t, fams, "aeron_channel_status", map[string]string{"type": "snd-channel", "channel": pub}))
	require.Equal(t, 1.0, value(t, fams, "aeron_channel_status", map[string]string{"type": "rcv-channel", "channel": sub}))
	require.Equal(t, 0.0, value(t, fams, "aeron_errors_distinct", nil))
	require.NotContains(t, fams, "aeron_system_counter", "every system counter of 1.48 has a name")
	require.NotContains(t, fams, "aeron_loss_bytes_total", "no loss-report.dat here")
}

func streamKeyBytes(reg int64, session, stream int32, channel string) []byte {
	k := make([]byte, 20+len(channel))
	binary.LittleEndian.PutUint64(k, uint64(reg))
	binary.LittleEndian.PutUint32(k[8:], uint32(session))
	binary.LittleEndian.PutUint32(k[12:], uint32(stream))
	binary.LittleEndian.PutUint32(k[16:], uint32(len(channel)))
	copy(k[20:], channel)
	return k
}

// TestWrittenCnC writes a CnC file as a driver does (counters manager,
// error log, loss report, heartbeat) and follows it across scrapes.
func TestWrittenCnC(t *testing.T) {
	dir := t.TempDir()
	c := NewCollector(dir)
	fams := scrape(t, c)
	require.Equal(t, 0.0, value(t, fams, "aeron_driver_up", nil), "no driver yet")
	require.Len(t, fams, 1)

	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	f, err := cnc.Create(cnc.Path(dir), cnc.Layout{ToDriverCapacity: 1024, ToClientsCapacity: 1024,
		CounterValuesLength: 64 * cnc.CounterValueLength, ErrorLogLength: 4096, PID: 77, StartTimestamp: now.Add(-time.Hour)})
	require.NoError(t, err)
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)
	rb.SetConsumerHeartbeatTime(now.Add(-1500 * time.Millisecond).UnixMilli())
	m, err := cnc.NewCountersManager(f.CountersMetadataBuffer(), f.CountersValuesBuffer(), 0, func() int64 { return now.UnixMilli() })
	require.NoError(t, err)
	sysKey := func(id int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(id)) }
	for id := int32(0); id < 40; id++ {
		cid, err := m.Allocate(cnc.TypeSystem, sysKey(id), cnc.SystemCounterLabels[id])
		require.NoError(t, err)
		m.Value(cid).Store(int64(1000 + id))
	}
	unknown, err := m.Allocate(cnc.TypeSystem, sysKey(45), "A counter from the future")
	require.NoError(t, err)
	m.Value(unknown).Store(9)
	ch := "aeron:ib?endpoint=10.0.0.1:40456|mtu=8192"
	for i, typ := range []int32{cnc.TypePublisherLimit, cnc.TypeSenderPosition, cnc.TypeSubscriberPosition} {
		id, err := m.Allocate(typ, streamKeyBytes(11, -5, 1001, ch), "x")
		require.NoError(t, err)
		m.Value(id).Store(int64(4096 * (i + 1)))
	}
	// Two subscriptions to one stream differ by registration id.
	id, err := m.Allocate(cnc.TypeSubscriberPosition, streamKeyBytes(12, -5, 1001, ch), "x")
	require.NoError(t, err)
	m.Value(id).Store(8192)
	_, err = m.Allocate(cnc.TypeClientHeartbeatTimestamp, make([]byte, 8), "client-heartbeat: id=9")
	require.NoError(t, err)

	el, err := cnc.NewDistinctErrorLog(f.ErrorLogBuffer(), func() int64 { return now.UnixMilli() })
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, el.Record(4, "(-4) channel endpoint error: bind failed"))
	}
	require.NoError(t, el.Record(11, "(-11) ib: QP to ERROR"))

	lm, err := shm.Create(cnc.LossReportPath(dir), cnc.DefaultLossReportLength)
	require.NoError(t, err)
	defer lm.Close()
	lr, err := cnc.NewLossReport(lm.Bytes())
	require.NoError(t, err)
	off, err := lr.CreateEntry(1408, now.UnixMilli(), -5, 1001, ch, "10.0.0.2:40456")
	require.NoError(t, err)
	lr.RecordObservation(off, 2816, now.UnixMilli())

	fams = scrape(t, c)
	require.Equal(t, 1.0, value(t, fams, "aeron_driver_up", nil))
	require.Equal(t, 1.5, value(t, fams, "aeron_driver_heartbeat_age_seconds", nil))
	require.Equal(t, float64(now.Add(-time.Hour).Unix()), value(t, fams, "aeron_driver_start_time_seconds", nil))
	require.Equal(t, 1000.0, value(t, fams, "aeron_bytes_sent_total", nil))
	require.Equal(t, 1039.0, value(t, fams, "aeron_error_frames_sent_total", nil))
	require.Equal(t, 1035.0, value(t, fams, "aeron_bytes_mapped", nil))
	require.Equal(t, 9.0, value(t, fams, "aeron_system_counter", map[string]string{"id": "45", "label": "A counter from the future"}))
	pos := map[string]string{"session_id": "-5", "stream_id": "1001", "channel": ch}
	with := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range pos {
			m[k] = v
		}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	require.Equal(t, 4096.0, value(t, fams, "aeron_stream_position_bytes", with("type", "pub-lmt")))
	require.Equal(t, 8192.0, value(t, fams, "aeron_stream_position_bytes", with("type", "snd-pos")))
	require.Equal(t, 12288.0, value(t, fams, "aeron_stream_position_bytes", with("type", "sub-pos", "registration_id", "11")))
	require.Equal(t, 8192.0, value(t, fams, "aeron_stream_position_bytes", with("type", "sub-pos", "registration_id", "12")))
	require.Equal(t, 1.0, value(t, fams, "aeron_clients", nil))
	require.Equal(t, 2.0, value(t, fams, "aeron_errors_distinct", nil))
	require.Equal(t, 4.0, value(t, fams, "aeron_error_observations_total", nil))
	loss := map[string]string{"session_id": "-5", "stream_id": "1001", "channel": ch, "source": "10.0.0.2:40456"}
	require.Equal(t, 2.0, value(t, fams, "aeron_loss_observations_total", loss))
	require.Equal(t, 4224.0, value(t, fams, "aeron_loss_bytes_total", loss))

	// Counters move between scrapes: the next scrape sees it.
	m.Value(0).Store(5000)
	require.Equal(t, 5000.0, value(t, scrape(t, c), "aeron_bytes_sent_total", nil))
}

// TestDamagedFilesAreReportedNotFatal: a CnC file cut short still answers
// (driver down), and a broken loss report gives aeron_scrape_error.
func TestDamagedFilesAreReportedNotFatal(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(cnc.Path(dir), []byte{1, 0, 0}, 0o644))
	var errs []string
	c := NewCollector(dir)
	c.OnError = func(err error) { errs = append(errs, err.Error()) }
	fams := scrape(t, c)
	require.Equal(t, 0.0, value(t, fams, "aeron_driver_up", nil))
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], filepath.Join(dir, "cnc.dat"))

	dir = t.TempDir()
	f, err := cnc.Create(cnc.Path(dir), cnc.Layout{ToDriverCapacity: 1024, ToClientsCapacity: 1024,
		CounterValuesLength: 4 * cnc.CounterValueLength, ErrorLogLength: 4096, PID: 1, StartTimestamp: time.Now()})
	require.NoError(t, err)
	defer f.Close()
	bad := make([]byte, 4096)
	binary.LittleEndian.PutUint64(bad, 1)          // one observation
	binary.LittleEndian.PutUint32(bad[40:], 90000) // channel longer than the file
	require.NoError(t, os.WriteFile(cnc.LossReportPath(dir), bad, 0o644))
	c = NewCollector(dir)
	errs = nil
	c.OnError = func(err error) { errs = append(errs, err.Error()) }
	fams = scrape(t, c)
	require.Equal(t, 1.0, value(t, fams, "aeron_driver_up", nil))
	require.Equal(t, 1.0, value(t, fams, "aeron_scrape_error", map[string]string{"part": "loss"}))
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], "loss-report.dat")
}
