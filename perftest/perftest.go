package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Version is what -V prints: the perftest protocol version ibgo speaks.
const Version = protoVersion

// Result is what one side of a run measured: one record per message size,
// as the table printed them (a unidirectional RDMA bandwidth server has the
// client's numbers, as perftest prints them; a read or atomic latency
// server has none).
type Result struct {
	Records []Record
	// BelowLimit: a bandwidth or message rate fell below Config.LimitBW or
	// LimitMR (-w, -y).
	BelowLimit bool
	// CQEvents is how many completion events the run waited for (-e);
	// 0 without -e.
	CQEvents uint64
}

// Run runs one side of a test: the server when cfg.Server is empty, else
// the client. It validates cfg and derives perftest's dependent values on
// a copy, opens the device, makes the out-of-band exchange, runs the test
// and prints perftest's output to cfg.Stdout as it goes. A failure is an
// *Error (or the context's error when ctx ends the run; the peer then sees
// the connection close). Run may be called from several goroutines at once
// with different ports (a server and a client in one process, for example).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	c := cfg
	notices, err := c.prepare()
	if err != nil {
		return nil, &Error{Kind: KindConfig, op: opCheck, Err: err}
	}
	e := &engine{cfg: &c, ctx: ctx, pr: newPrinter(c.Stdout, c.Stderr)}
	for _, n := range notices {
		fmt.Fprint(e.pr.out, n)
	}
	initClock()
	defer e.close()
	if err := e.run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return &Result{Records: e.pr.records, BelowLimit: e.pr.belowLimit, CQEvents: e.ev.count.Load()}, nil
}

func (e *engine) run() error {
	if err := e.open(); err != nil {
		return err
	}
	if e.cfg.CPUUtil {
		if e.cfg.Duration == 0 {
			fmt.Fprint(e.pr.out, resultLine)
			fmt.Fprintln(e.pr.errw, " CPU Utilization works only with Duration mode.")
		} else {
			e.meas.cpu.enabled = true
		}
	}
	if err := e.establish(); err != nil {
		return err
	}
	if err := e.setup(); err != nil {
		return err
	}
	e.banner()
	return e.runFlow(flowFor(e.cfg))
}

// Main is a perftest program: it parses args (without the program name) for
// test t, runs it and returns the exit status, printing everything as
// perftest does (prog names the program in messages). cmd/ibgo runs the
// perftest tools through it.
func Main(ctx context.Context, t Test, prog string, args []string, stdout, stderr io.Writer) int {
	cmd, err := ParseArgs(t, prog, args)
	if err != nil {
		PrintError(stdout, stderr, err)
		if pe := (*ParseError)(nil); errors.As(err, &pe) && pe.ShowUsage {
			fmt.Fprint(stdout, Usage(t, prog))
		}
		return 1
	}
	if cmd.Help {
		fmt.Fprint(stdout, Usage(t, prog))
		return 0
	}
	if cmd.Version {
		fmt.Fprintf(stdout, "Version: %s\n", Version)
		return 0
	}
	for _, n := range cmd.Notices {
		fmt.Fprint(stdout, n)
	}
	cfg := cmd.Config
	cfg.Stdout, cfg.Stderr = stdout, stderr
	res, err := Run(ctx, cfg)
	if err != nil {
		PrintError(stdout, stderr, err)
		return 1
	}
	if cfg.JSONFile != "" {
		if err := writeJSONFile(cfg.JSONFile, res.Records); err != nil {
			fmt.Fprintf(stderr, " Couldn't write %s: %v\n", cfg.JSONFile, err)
			return 1
		}
	}
	if res.BelowLimit {
		if cfg.LimitBW > 0 {
			fmt.Fprintln(stderr, "Error: BW result is below bw limit")
		}
		if cfg.LimitMR > 0 {
			fmt.Fprintln(stderr, "Error: Msg rate  is below msg_rate limit")
		}
		return 1
	}
	return 0
}

// PrintError prints err as perftest prints the failure it stands for: a
// *ParseError as perftest's parser does (a separator line on stdout, the
// message on stderr), an *Error in perftest's words on stderr.
func PrintError(stdout, stderr io.Writer, err error) {
	var pe *ParseError
	var e *Error
	switch {
	case errors.As(err, &pe):
		fmt.Fprint(stdout, resultLine)
		fmt.Fprintln(stderr, pe.Msg)
	case errors.As(err, &e):
		fmt.Fprintln(stderr, perftestText(e))
	default:
		fmt.Fprintln(stderr, err)
	}
}
