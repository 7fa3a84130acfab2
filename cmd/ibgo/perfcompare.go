package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ibgo/ibgo/perftest"
)

// runCompare is `ibgo perf compare [options] [server]`: the server when no
// server is named, else the client, which prints the table (or JSON).
func runCompare(args []string, stdout io.Writer) error {
	cfg := perftest.DefaultCompareConfig()
	fs := flag.NewFlagSet("ibgo perf compare", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.StringVar(&cfg.Dev, "d", "", "RDMA device (default: the first)")
	fs.IntVar(&cfg.GIDIndex, "x", -1, "GID index (default: perftest's choice: on RoCE the one of the IP)")
	fs.IntVar(&cfg.Port, "p", cfg.Port, "control port; the tests use the next three")
	fs.IntVar(&cfg.Size, "size", cfg.Size, "bandwidth tests' message size in bytes")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "each bandwidth test's length (whole seconds, at least 1s)")
	fs.IntVar(&cfg.LatSize, "lat-size", cfg.LatSize, "latency tests' message size in bytes")
	fs.IntVar(&cfg.LatIters, "iters", cfg.LatIters, "latency round trips measured")
	fs.StringVar(&cfg.Verbs, "verbs", cfg.Verbs, "the verbs bandwidth test: write or send (RC), or ud (send_bw over UD; --size at most the port's MTU)")
	asJSON := fs.Bool("json", false, "print the results as JSON (client)")
	fs.Usage = func() {
		fmt.Fprint(stdout, "usage: ibgo perf compare [options] [server]\n\n"+
			"Bandwidth, each side's CPU and latency over a TCP socket (tcp_bw, tcp_lat) and over verbs\n"+
			"(rc_bw: perftest's write_bw or send_bw; rc_lat: send_lat) on one link. Run it without a server\n"+
			"on one host and with that host's address on the other; the client prints the table. On IPoIB\n"+
			"the TCP tests measure IPoIB, on RoCE the netdev.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return fail(1, "perf compare: %v", err)
	}
	if fs.NArg() > 1 {
		return fail(1, "perf compare: one server address at most, got %q", fs.Args())
	}
	cfg.Server = fs.Arg(0)
	if !*asJSON {
		cfg.Stdout = stdout
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := perftest.Compare(ctx, cfg)
	if err != nil {
		return fail(1, "%v", err)
	}
	if cfg.Server == "" {
		return nil
	}
	if *asJSON {
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		return e.Encode(rows)
	}
	perftest.WriteCompareTable(stdout, rows)
	return nil
}
