// Command ibgo is the ibgo command-line tool: RDMA device listing and
// information, perftest-compatible benchmarks, and Aeron tools. One static
// binary, no cgo.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"

	"github.com/urfave/cli/v2"
)

// commands is filled by each command's file (init functions), so features
// can be added in separate files without touching this one.
var commands []*cli.Command

func register(c *cli.Command) { commands = append(commands, c) }

// exitError carries an exit status with a message (printed once, on stderr).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	return &cli.App{
		Writer:               stdout,
		ErrWriter:            stderr,
		Name:                 "ibgo",
		Version:              currentBuild().Version, // enables --version (version.go)
		Usage:                "RDMA verbs, perftest-compatible benchmarks and Aeron tools, in pure Go",
		Commands:             commands,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
	}
}

func main() {
	stop := profile(os.Getenv("IBGO_CPUPROFILE"))
	code := run(os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// profile writes a CPU profile of the whole run to file when it is set
// (IBGO_CPUPROFILE=/tmp/cpu.pprof ibgo perf ...; read it with go tool pprof).
func profile(file string) (stop func()) {
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ibgo: IBGO_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if t, ok := perftestProgram(args[0]); ok {
			return runPerf(t, args[1:], stdout, stderr)
		}
		if isRping(args[0]) {
			return runRping(args[1:], stdout, stderr)
		}
	}
	err := newApp(stdout, stderr).Run(args)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "ibgo:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "ibgo:", err)
	return 1
}
