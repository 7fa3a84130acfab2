// Package perftest is ibgo's perftest: the eight ib_{write,read,send,atomic}_{bw,lat}
// benchmarks, with perftest 4.5's flags, defaults, out-of-band exchange and
// output, so either side of a test can be the C tool. See docs/perf-tools.md.
//
// The API is small: a Config (DefaultConfig, or ParseArgs for a perftest
// command line), Run to run one side and get its Result, and Main for the
// whole program as cmd/ibgo runs it. Failures are *Error values that carry
// the facts; PrintError prints them in perftest's words.
//
// Run may be called concurrently (a server and a client in one process, on
// different ports); everything else here is a plain value (Config, Command,
// Result, Record, Test) or a pure function. The test loops of one run are
// single-threaded, like perftest's.
//
// The files follow perftest's concerns: config.go and args.go (options),
// resources.go (device and verbs objects: ctx_init, ctx_connect),
// session.go (the TCP exchange: perftest_communication.c), flow.go (the
// order of each test's handshakes, loops and reports: the eight mains),
// bw.go and lat.go (run_iter_*), duration.go (-D's clock), wr.go (work
// requests), report.go (output), errors.go, clock.go, alive.go (the
// dead-peer watchdog).
package perftest
