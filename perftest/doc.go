// Package perf is ibgo's perftest: the eight ib_{write,read,send,atomic}_{bw,lat}
// benchmarks, with perftest 4.5's flags, defaults, out-of-band exchange and
// output, so either side can be the C tool. See docs/perf-tools.md.
package perftest
