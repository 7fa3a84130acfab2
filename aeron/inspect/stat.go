package inspect

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// FormatDate formats epoch milliseconds as Aeron's tools do
// (aeron_format_date: "%Y-%m-%d %H:%M:%S.mmm%z", local time).
func FormatDate(ms int64, loc *time.Location) string {
	return time.UnixMilli(ms).In(loc).Format("2006-01-02 15:04:05.000-0700")
}

// FormatNumber groups digits in thousands with commas, as
// aeron_format_number_to_locale does in the C locale.
func FormatNumber(v int64) string {
	s := strconv.FormatInt(v, 10)
	neg := v < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := 0; i < len(s); i++ {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Stat prints the CnC header and every allocated counter as the C
// AeronStat does (aeron_stat.c):
//
//	2026-12-02 17:20:03.917+0000 - Aeron Stat (CnC v0.2.0), pid 30052, heartbeat age 188ms
//	===========================
//	  0 :            3,024,064 - Bytes sent
//
// now and loc fix the clock and time zone (time.Now(), time.Local in the
// command) so that the output can be tested.
func Stat(w io.Writer, f *cnc.File, now time.Time, loc *time.Location) error {
	counters, err := f.Counters()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	nowMs := now.UnixMilli()
	fmt.Fprintf(bw, "%s - Aeron Stat (CnC v%s), pid %d, heartbeat age %dms\n",
		FormatDate(nowMs, loc), f.Version(), f.PID(), nowMs-f.DriverHeartbeat())
	fmt.Fprintln(bw, "===========================")
	counters.ForEach(func(c cnc.Counter) bool {
		fmt.Fprintf(bw, "%3d : %20s - %s\n", c.ID, FormatNumber(c.Value), c.Label)
		return true
	})
	return bw.Flush()
}

// Errors prints the distinct error log as the C ErrorStat does
// (error_stat.c) and returns the number of distinct errors.
func Errors(w io.Writer, f *cnc.File, loc *time.Location) (int, error) {
	bw := bufio.NewWriter(w)
	n, err := cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) {
		fmt.Fprintf(bw, "***\n%d observations from %s to %s for:\n %s\n",
			o.Count, FormatDate(o.FirstTimestamp, loc), FormatDate(o.LastTimestamp, loc), o.Text)
	})
	fmt.Fprintf(bw, "\n%d distinct errors observed.\n", n)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

// Loss prints a loss report (loss-report.dat) as Aeron's LossStat does:
// a CSV header, one line per stream, and the entry count.
func Loss(w io.Writer, report []byte, loc *time.Location) (int, error) {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, SESSION_ID, STREAM_ID, CHANNEL, SOURCE")
	n, err := cnc.ReadLossReport(report, func(e cnc.LossEntry) {
		fmt.Fprintf(bw, "%d,%d,%s,%s,%d,%d,%s,%s\n", e.ObservationCount, e.TotalBytesLost,
			FormatDate(e.FirstObservation, loc), FormatDate(e.LastObservation, loc), e.SessionID, e.StreamID, e.Channel, e.Source)
	})
	fmt.Fprintf(bw, "%d entries read\n", n)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}
