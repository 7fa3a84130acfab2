// Package metrics exports a media driver's CnC counters, error log and loss
// report as Prometheus metrics (`ibgo aeron metrics`). It reads cnc.dat the
// way AeronStat does, at every scrape, so it works against ibgo's driver and
// Aeron's C and Java drivers alike, and survives driver restarts.
//
// Metric names and labels are stable: system counters have one name each
// (aeron_bytes_sent_total, ...), chosen by system counter id, never by label
// text; stream positions are one family with the counter type as a label.
// The exposition itself is the Prometheus client library's.
package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/internal/shm"
)

// systemCounter names one system counter (aeron_system_counters.c ids).
type systemCounter struct {
	name  string
	help  string
	gauge bool    // a level, not a monotonic count
	scale float64 // multiplies the value (ns to s); 0 means 1
}

// systemCounters maps system counter ids 0..39 to metric names. Ids the
// table lacks (newer drivers) are exported as aeron_system_counter{id,label}.
var systemCounters = map[int32]systemCounter{
	0:  {name: "aeron_bytes_sent_total", help: "Bytes sent by the driver."},
	1:  {name: "aeron_bytes_received_total", help: "Bytes received by the driver."},
	2:  {name: "aeron_receiver_proxy_failed_offers_total", help: "Failed offers to the ReceiverProxy."},
	3:  {name: "aeron_sender_proxy_failed_offers_total", help: "Failed offers to the SenderProxy."},
	4:  {name: "aeron_conductor_proxy_failed_offers_total", help: "Failed offers to the DriverConductorProxy."},
	5:  {name: "aeron_naks_sent_total", help: "NAKs sent."},
	6:  {name: "aeron_naks_received_total", help: "NAKs received."},
	7:  {name: "aeron_status_messages_sent_total", help: "Status messages sent."},
	8:  {name: "aeron_status_messages_received_total", help: "Status messages received."},
	9:  {name: "aeron_heartbeats_sent_total", help: "Heartbeats sent."},
	10: {name: "aeron_heartbeats_received_total", help: "Heartbeats received."},
	11: {name: "aeron_retransmits_sent_total", help: "Retransmits sent."},
	12: {name: "aeron_flow_control_under_runs_total", help: "Flow control under runs."},
	13: {name: "aeron_flow_control_over_runs_total", help: "Flow control over runs."},
	14: {name: "aeron_invalid_packets_total", help: "Invalid packets received."},
	15: {name: "aeron_errors_total", help: "Errors the driver recorded."},
	16: {name: "aeron_short_sends_total", help: "Short sends."},
	17: {name: "aeron_free_fails_total", help: "Failed attempts to free log buffers."},
	18: {name: "aeron_sender_flow_control_limits_total", help: "Sender flow control limits (back-pressure events)."},
	19: {name: "aeron_unblocked_publications_total", help: "Unblocked publications."},
	20: {name: "aeron_unblocked_commands_total", help: "Unblocked control commands."},
	21: {name: "aeron_possible_ttl_asymmetry_total", help: "Possible TTL asymmetry."},
	22: {name: "aeron_controllable_idle_strategy_status", help: "ControllableIdleStrategy status.", gauge: true},
	23: {name: "aeron_loss_gap_fills_total", help: "Loss gap fills."},
	24: {name: "aeron_client_timeouts_total", help: "Client liveness timeouts."},
	25: {name: "aeron_resolution_changes_total", help: "Name resolution changes."},
	26: {name: "aeron_conductor_max_cycle_time_seconds", help: "Conductor's longest duty cycle.", gauge: true, scale: 1e-9},
	27: {name: "aeron_conductor_cycle_time_threshold_exceeded_total", help: "Conductor duty cycles over the threshold."},
	28: {name: "aeron_sender_max_cycle_time_seconds", help: "Sender's longest duty cycle.", gauge: true, scale: 1e-9},
	29: {name: "aeron_sender_cycle_time_threshold_exceeded_total", help: "Sender duty cycles over the threshold."},
	30: {name: "aeron_receiver_max_cycle_time_seconds", help: "Receiver's longest duty cycle.", gauge: true, scale: 1e-9},
	31: {name: "aeron_receiver_cycle_time_threshold_exceeded_total", help: "Receiver duty cycles over the threshold."},
	32: {name: "aeron_name_resolver_max_time_seconds", help: "Name resolver's longest resolution.", gauge: true, scale: 1e-9},
	33: {name: "aeron_name_resolver_time_threshold_exceeded_total", help: "Name resolutions over the threshold."},
	// 34, "Aeron software", becomes aeron_driver_build_info.
	35: {name: "aeron_bytes_mapped", help: "Bytes currently mapped by the driver.", gauge: true},
	36: {name: "aeron_retransmitted_bytes_total", help: "Bytes retransmitted."},
	37: {name: "aeron_retransmit_overflows_total", help: "Retransmit pool overflows."},
	38: {name: "aeron_error_frames_received_total", help: "Error frames received."},
	39: {name: "aeron_error_frames_sent_total", help: "Error frames sent."},
}

const systemCounterSoftware = 34

// streamPositionTypes are the per-stream position counters, by type id,
// named as Aeron labels them.
var streamPositionTypes = map[int32]string{
	cnc.TypePublisherLimit:     "pub-lmt",
	cnc.TypeSenderPosition:     "snd-pos",
	cnc.TypeReceiverHWM:        "rcv-hwm",
	cnc.TypeSubscriberPosition: "sub-pos",
	cnc.TypeReceiverPosition:   "rcv-pos",
	cnc.TypeSenderLimit:        "snd-lmt",
	cnc.TypePublisherPosition:  "pub-pos",
}

var streamLabels = []string{"type", "session_id", "stream_id", "channel", "registration_id"}
var lossLabels = []string{"session_id", "stream_id", "channel", "source"}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descUp          = desc("aeron_driver_up", "1 when cnc.dat could be read (a driver exists in the directory), else 0.")
	descHeartbeat   = desc("aeron_driver_heartbeat_age_seconds", "Age of the driver's heartbeat in cnc.dat; clients give up on a driver at 10 s by default.")
	descStart       = desc("aeron_driver_start_time_seconds", "When the driver started, seconds since the epoch.")
	descCnC         = desc("aeron_cnc_info", "The CnC file's version and the driver's pid.", "cnc_version", "pid")
	descBuild       = desc("aeron_driver_build_info", "The driver's software version (system counter 34).", "version", "commit")
	descClients     = desc("aeron_clients", "Clients with a heartbeat counter (connected clients).")
	descPosition    = desc("aeron_stream_position_bytes", "Stream positions (pub-lmt, pub-pos, snd-pos, snd-lmt, rcv-hwm, rcv-pos, sub-pos), in bytes.", streamLabels...)
	descBPE         = desc("aeron_stream_back_pressure_events_total", "Back-pressure events of a publication (snd-bpe).", streamLabels[1:]...)
	descChannel     = desc("aeron_channel_status", "Channel endpoint status: 1 active, 0 initialising, 2 closing, -1 errored.", "type", "channel")
	descSystem      = desc("aeron_system_counter", "System counters this ibgo has no name for, by id.", "id", "label")
	descErrDistinct = desc("aeron_errors_distinct", "Distinct errors in the driver's error log.")
	descErrObs      = desc("aeron_error_observations_total", "Observations of all errors in the driver's error log.")
	descLossObs     = desc("aeron_loss_observations_total", "Loss observations per stream (loss-report.dat).", lossLabels...)
	descLossBytes   = desc("aeron_loss_bytes_total", "Bytes lost per stream (loss-report.dat).", lossLabels...)
	descScrapeErr   = desc("aeron_scrape_error", "1 when part of the driver's files could not be read at this scrape (see the log).", "part")
)

// Collector reads one Aeron directory at every Collect. Collect may be
// called from several goroutines at once (each opens the files itself).
type Collector struct {
	dir    string
	now    func() time.Time
	system map[int32]*prometheus.Desc
	// OnError, if set, is told about files that could not be read.
	OnError func(error)
}

// NewCollector returns a collector for the driver whose cnc.dat is in dir.
func NewCollector(dir string) *Collector {
	c := &Collector{dir: dir, now: time.Now, system: map[int32]*prometheus.Desc{}}
	for id, s := range systemCounters {
		c.system[id] = desc(s.name, s.help)
	}
	return c
}

// Describe sends nothing: the label values are the driver's streams, known
// only at scrape time (an unchecked collector).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

func (c *Collector) report(err error) {
	if c.OnError != nil {
		c.OnError(err)
	}
}

// Collect reads cnc.dat and loss-report.dat and sends their metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	f, err := cnc.Open(c.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, cnc.ErrNotReady) {
			c.report(fmt.Errorf("%s: %w", cnc.Path(c.dir), err))
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	defer f.Close()
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	now := c.now()
	if hb := f.DriverHeartbeat(); hb > 0 {
		ch <- prometheus.MustNewConstMetric(descHeartbeat, prometheus.GaugeValue, now.Sub(time.UnixMilli(hb)).Seconds())
	}
	if st := f.StartTimestamp(); st > 0 {
		ch <- prometheus.MustNewConstMetric(descStart, prometheus.GaugeValue, float64(st)/1e3)
	}
	ch <- prometheus.MustNewConstMetric(descCnC, prometheus.GaugeValue, 1, f.Version().String(), strconv.FormatInt(f.PID(), 10))
	c.collectCounters(ch, f)
	c.collectErrors(ch, f)
	c.collectLoss(ch)
}

func (c *Collector) scrapeError(ch chan<- prometheus.Metric, part string, err error) {
	c.report(err)
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, 1, part)
}

func (c *Collector) collectCounters(ch chan<- prometheus.Metric, f *cnc.File) {
	r, err := f.Counters()
	if err != nil {
		c.scrapeError(ch, "counters", fmt.Errorf("%s: %w", f.FilePath(), err))
		return
	}
	clients := 0
	// The registry rejects two metrics with one label set; a driver may
	// (briefly) hold two counters that look alike, so the first one wins.
	seen := map[string]bool{}
	once := func(parts ...string) bool {
		k := strings.Join(parts, "\x00")
		if seen[k] {
			return false
		}
		seen[k] = true
		return true
	}
	r.ForEach(func(ct cnc.Counter) bool {
		v := float64(ct.Value)
		switch ct.TypeID {
		case cnc.TypeSystem:
			id := ct.ID
			if len(ct.Key) >= 4 {
				id = int32(binary.LittleEndian.Uint32(ct.Key))
			}
			if id == systemCounterSoftware {
				version, commit := softwareLabels(ct.Label)
				if once("build") {
					ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, 1, version, commit)
				}
				return true
			}
			s, ok := systemCounters[id]
			if !ok {
				if once("sys", strconv.Itoa(int(id))) {
					ch <- prometheus.MustNewConstMetric(descSystem, prometheus.GaugeValue, v, strconv.Itoa(int(id)), ct.Label)
				}
				return true
			}
			if !once("sys", strconv.Itoa(int(id))) {
				return true
			}
			if s.scale != 0 {
				v *= s.scale
			}
			t := prometheus.CounterValue
			if s.gauge {
				t = prometheus.GaugeValue
			}
			ch <- prometheus.MustNewConstMetric(c.system[id], t, v)
		case cnc.TypeClientHeartbeatTimestamp:
			clients++
		case cnc.TypeSenderBPE:
			k := streamKey(ct)
			if once("bpe", k.session, k.stream, k.channel, k.registration) {
				ch <- prometheus.MustNewConstMetric(descBPE, prometheus.CounterValue, v, k.session, k.stream, k.channel, k.registration)
			}
		case cnc.TypeSendChannelStatus, cnc.TypeReceiveChannelStatus:
			kind := "snd-channel"
			if ct.TypeID == cnc.TypeReceiveChannelStatus {
				kind = "rcv-channel"
			}
			channel := channelKey(ct)
			if once("chan", kind, channel) {
				ch <- prometheus.MustNewConstMetric(descChannel, prometheus.GaugeValue, v, kind, channel)
			}
		default:
			kind, ok := streamPositionTypes[ct.TypeID]
			if !ok {
				return true
			}
			k := streamKey(ct)
			if once("pos", kind, k.session, k.stream, k.channel, k.registration) {
				ch <- prometheus.MustNewConstMetric(descPosition, prometheus.GaugeValue, v, kind, k.session, k.stream, k.channel, k.registration)
			}
		}
		return true
	})
	ch <- prometheus.MustNewConstMetric(descClients, prometheus.GaugeValue, float64(clients))
}

type streamIDs struct{ session, stream, channel, registration string }

// streamKey decodes a stream counter's key
// (aeron_stream_position_counter_key_layout_t: registration_id int64,
// session_id int32, stream_id int32, channel_length int32, channel).
func streamKey(ct cnc.Counter) streamIDs {
	k := ct.Key
	if len(k) < 20 {
		return streamIDs{registration: strconv.FormatInt(ct.RegistrationID, 10)}
	}
	ids := streamIDs{
		registration: strconv.FormatInt(int64(binary.LittleEndian.Uint64(k)), 10),
		session:      strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(k[8:]))), 10),
		stream:       strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(k[12:]))), 10),
	}
	if n := int(int32(binary.LittleEndian.Uint32(k[16:]))); n > 0 && n <= len(k)-20 {
		ids.channel = string(k[20 : 20+n])
	}
	return ids
}

// channelKey decodes a channel endpoint status counter's key
// (aeron_channel_endpoint_status_key_layout_t: channel_length int32,
// channel); channels longer than the key are cut there, as in Aeron.
func channelKey(ct cnc.Counter) string {
	k := ct.Key
	if len(k) < 4 {
		return ""
	}
	n := int(int32(binary.LittleEndian.Uint32(k)))
	if n <= 0 {
		return ""
	}
	return string(k[4 : 4+min(n, len(k)-4)])
}

// softwareLabels pulls version= and commit= out of system counter 34's
// label ("Aeron software: version=1.48.0 commit=abc").
func softwareLabels(label string) (version, commit string) {
	for _, f := range strings.Fields(label) {
		if v, ok := strings.CutPrefix(f, "version="); ok {
			version = v
		}
		if v, ok := strings.CutPrefix(f, "commit="); ok {
			commit = v
		}
	}
	return version, commit
}

func (c *Collector) collectErrors(ch chan<- prometheus.Metric, f *cnc.File) {
	var distinct, observations int64
	_, err := cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) {
		distinct++
		observations += int64(o.Count)
	})
	if err != nil {
		// The entries before the damage were counted; say so and go on.
		c.scrapeError(ch, "errors", fmt.Errorf("%s error log: %w", f.FilePath(), err))
	}
	ch <- prometheus.MustNewConstMetric(descErrDistinct, prometheus.GaugeValue, float64(distinct))
	ch <- prometheus.MustNewConstMetric(descErrObs, prometheus.CounterValue, float64(observations))
}

func (c *Collector) collectLoss(ch chan<- prometheus.Metric) {
	path := cnc.LossReportPath(c.dir)
	m, err := shm.Map(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return // drivers create it at the first loss, or never
	}
	if err != nil {
		c.scrapeError(ch, "loss", fmt.Errorf("%s: %w", path, err))
		return
	}
	defer m.Close()
	seen := map[LossKey]bool{}
	_, err = cnc.ReadLossReport(m.Bytes(), func(e cnc.LossEntry) {
		k := LossKey{e.SessionID, e.StreamID, e.Channel, e.Source}
		if seen[k] {
			return
		}
		seen[k] = true
		ls := []string{strconv.Itoa(int(e.SessionID)), strconv.Itoa(int(e.StreamID)), e.Channel, e.Source}
		ch <- prometheus.MustNewConstMetric(descLossObs, prometheus.CounterValue, float64(e.ObservationCount), ls...)
		ch <- prometheus.MustNewConstMetric(descLossBytes, prometheus.CounterValue, float64(e.TotalBytesLost), ls...)
	})
	if err != nil {
		c.scrapeError(ch, "loss", fmt.Errorf("%s: %w", path, err))
	}
}

// LossKey identifies a loss report entry.
type LossKey struct {
	SessionID, StreamID int32
	Channel, Source     string
}

// Handler serves the metrics of the driver in dir in the Prometheus text
// (or, when asked, protobuf/OpenMetrics) format. Safe for concurrent use.
func Handler(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
