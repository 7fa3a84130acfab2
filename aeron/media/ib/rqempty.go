package ib

// Receive queues that ran empty.
//
// A UD datagram that finds no receive buffer posted is dropped by the
// device without a completion; an RC message that finds the SRQ empty is
// refused with an RNR NAK and sent again by the peer's QP. Neither shows
// anywhere the receiver reads, so the medium counts them two ways:
//
//   - inferred, on every device: a transport counts the receive work
//     requests it has posted and not yet seen complete; when a poll takes
//     the completion of the last one, the queue was empty from that
//     completion until the agent reposts, and anything arriving then was
//     dropped (UD) or RNR-refused (RC). Media.RingEmpty and
//     RCStats.SRQEmpty count those moments, not the datagrams.
//   - from the device, where it counts them: the ports' out_of_buffer
//     hardware counter (ConnectX: "receive WQEs not available", per
//     port, every process's QPs on it), read once a second for the ports
//     the medium's endpoints live on, as the increase since the medium
//     first read it (Media.DeviceOutOfBuffer). soft-RoCE has no such
//     counter (it drops a UD datagram without counting it) and the value
//     stays 0 there.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// deviceCounters is the Media's reading of the ports' hardware counters.
type deviceCounters struct {
	mu   sync.Mutex
	next int64             // when the next read is due (UnixNano)
	base map[portRef]int64 // each port's out_of_buffer at its first read
}

// deviceCounterEvery is how often the ports' counters are read.
const deviceCounterEvery = time.Second

// readDeviceCounters updates DeviceOutOfBuffer when a second has passed
// since the last read. Any goroutine: UD transports call it from their
// once-a-second sweep, RC subscriptions once in 1024 idle Recvs.
func (m *Media) readDeviceCounters(now int64) {
	d := &m.devCounters
	if !d.mu.TryLock() {
		return // another agent is reading
	}
	defer d.mu.Unlock()
	if now < d.next {
		return
	}
	d.next = now + deviceCounterEvery.Nanoseconds()
	m.async.mu.Lock()
	ports := make([]portRef, 0, len(m.async.used))
	for p := range m.async.used {
		ports = append(ports, p)
	}
	m.async.mu.Unlock()
	var sum int64
	seen := false
	for _, p := range ports {
		v, ok := portCounter(p, "out_of_buffer")
		if !ok {
			continue
		}
		if d.base == nil {
			d.base = map[portRef]int64{}
		}
		b, known := d.base[p]
		if !known || v < b { // first read, or the counter was reset
			d.base[p], b = v, v
		}
		sum += v - b
		seen = true
	}
	if seen {
		m.DeviceOutOfBuffer.Store(sum)
	}
}

// portCounter reads one of a port's hardware counters (sysfs
// hw_counters); false when the device has no such counter.
func portCounter(p portRef, name string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(uverbs.SysfsRoot, "class/infiniband", p.dev, "ports", strconv.Itoa(p.port), "hw_counters", name))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
