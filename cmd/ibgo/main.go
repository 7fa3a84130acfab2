// Command ibgo is the ibgo command-line tool: RDMA device listing and
// information, perftest-compatible benchmarks, and Aeron tools. One static
// binary, no cgo.
package main

import (
	"errors"
	"fmt"
	"os"
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

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	return &cli.App{
		Name:                 "ibgo",
		Usage:                "RDMA verbs, perftest-compatible benchmarks and Aeron tools, in pure Go",
		Commands:             commands,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
	}
}

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	err := newApp().Run(args)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "ibgo:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "ibgo:", err)
	return 1
}
