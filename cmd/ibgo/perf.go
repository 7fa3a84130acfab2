package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/perftest"
)

func init() {
	var names []string
	for _, t := range perftest.Tests {
		names = append(names, t.Name())
	}
	register(&cli.Command{
		Name:            "perf",
		Usage:           "perftest-compatible benchmarks: ibgo perf <" + strings.Join(names, "|") + "> [perftest options] [server]; ibgo perf compare: sockets against verbs",
		ArgsUsage:       "<test> [perftest options] [server]",
		SkipFlagParsing: true,
		Description: "Runs one of perftest's ib_*_bw/ib_*_lat tests with the same flags, output and out-of-band\n" +
			"exchange, so either side may be the C tool. `ibgo perf write_bw -h` shows the test's options.\n" +
			"Installed as a link named ib_write_bw (etc.), ibgo behaves as that program.\n\n" +
			"Examples:\n" +
			"   ibgo perf write_bw -d mlx5_0 -D 10 --report_gbits          # server\n" +
			"   ibgo perf write_bw -d mlx5_0 -D 10 --report_gbits server1  # client\n" +
			"   ln -s ibgo ib_send_lat && ./ib_send_lat -V\n\n" +
			"ibgo perf compare [-d dev] [-x gid] [--json] [server] measures bandwidth, each side's CPU and\n" +
			"latency over a TCP socket and over verbs (RC) on one link, as qperf's tcp_bw/tcp_lat beside\n" +
			"rc_bw/rc_lat; `ibgo perf compare -h` shows its options.\n\n" +
			"Environment:\n" +
			"   IBGO_CPUPROFILE   write a CPU profile of the run to this file (read it with go tool pprof)\n" +
			"   IBGO_PERF_CLOCK   \"monotonic\" uses the OS clock instead of the CPU cycle counter\n" +
			"   GOMAXPROCS        when unset, a test runs on one P, as perftest runs on one thread",
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				// The command's own help; `ibgo perf <test> -h` prints the test's (perftest's) usage.
				cli.HelpPrinter(c.App.Writer, cli.CommandHelpTemplate, c.Command)
				return nil
			}
			if len(args) == 0 {
				fmt.Fprintf(c.App.Writer, "usage: ibgo perf <test> [perftest options] [server]\ntests: %s\n", strings.Join(names, " "))
				return fail(1, "")
			}
			if args[0] == "compare" {
				return runCompare(args[1:], c.App.Writer)
			}
			t, ok := perftest.TestByName(args[0])
			if !ok {
				return fail(1, "perf: unknown test %q; tests are %s", args[0], strings.Join(names, ", "))
			}
			if code := runPerf(t, args[1:], c.App.Writer, c.App.ErrWriter); code != 0 {
				return fail(code, "")
			}
			return nil
		},
	})
}

// perftestProgram reports which test a program name (argv[0]) is, when ibgo
// is installed as ib_write_bw and the like.
func perftestProgram(argv0 string) (perftest.Test, bool) {
	base := filepath.Base(argv0)
	if !strings.HasPrefix(base, "ib_") {
		return perftest.Test{}, false
	}
	return perftest.TestByName(base)
}

// runPerf runs a perftest test as this process's only work. Like perftest it
// is one thread of execution, so it runs on one P (unless GOMAXPROCS says
// otherwise): when the loop yields, the runtime has no idle P to wake a
// thread for, and no spare thread spins beside the kernel's RDMA work.
func runPerf(t perftest.Test, args []string, stdout, stderr io.Writer) int {
	if os.Getenv("GOMAXPROCS") == "" {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	// Ctrl-C (or SIGTERM) ends the run through its context: the QPs and
	// the connection are closed in order and the peer sees the close.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return perftest.Main(ctx, t, "ib_"+t.Name(), args, stdout, stderr)
}
