package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/aeron/cnc"
)

// aeronSubcommand adds a subcommand to `ibgo aeron` from another file, so
// the tools added here need no edit of aeron.go. aeron.go's init runs
// first (files initialise in name order, and "aeron.go" sorts before
// "aeron_*.go"); TestAeronSubcommandsRegistered checks that it worked.
func aeronSubcommand(sub *cli.Command) {
	for _, c := range commands {
		if c.Name == "aeron" {
			c.Subcommands = append(c.Subcommands, sub)
			return
		}
	}
	panic("ibgo: the aeron command is not registered yet; " + sub.Name + " cannot be added to it")
}

// defaultDriverTimeout is Aeron's default driver timeout (aeron.driver.timeout,
// 10 s): clients consider a driver dead when its heartbeat is older.
const defaultDriverTimeout = 10 * time.Second

func init() {
	aeronSubcommand(&cli.Command{
		Name:  "health",
		Usage: "exit 0 if a media driver is alive (its heartbeat in cnc.dat is recent), else 1: for liveness/readiness probes",
		Description: "Reads the driver's heartbeat, the consumer heartbeat time of the to-driver ring buffer in\n" +
			"cnc.dat, as Aeron clients do to decide whether a driver is active (CommonContext.isDriverActive),\n" +
			"and compares its age with --timeout. Works against ibgo's driver and Aeron's C and Java drivers.\n\n" +
			"Example (a Kubernetes exec probe):\n" +
			"   ibgo aeron health --dir /dev/shm/aeron --timeout 10s\n\n" +
			"Environment:\n" +
			"   AERON_DIR   the Aeron directory when --dir is not given",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Aliases: []string{"d"}, Usage: "Aeron directory holding cnc.dat (default: $AERON_DIR, else " + defaultAeronDir() + ")"},
			&cli.DurationFlag{Name: "timeout", Value: defaultDriverTimeout, Usage: "the heartbeat may be at most this old (Aeron's driver timeout)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing when the driver is alive"},
		},
		Action: aeronHealth,
	})
}

func aeronHealth(c *cli.Context) error {
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return fail(1, "--timeout %v must be positive", timeout)
	}
	f, err := openCnC(c)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkHeartbeat(f, time.Now(), timeout); err != nil {
		return err
	}
	if !c.Bool("quiet") {
		age := time.Since(time.UnixMilli(f.DriverHeartbeat())).Round(time.Millisecond)
		fmt.Fprintf(c.App.Writer, "driver alive: pid %d, heartbeat %v ago, cnc version %v, %s\n", f.PID(), age, f.Version(), f.FilePath())
	}
	return nil
}

// checkHeartbeat mirrors Aeron's CommonContext.isDriverActive: the CnC
// version must be one we read and the driver's heartbeat no older than
// timeout.
func checkHeartbeat(f *cnc.File, now time.Time, timeout time.Duration) error {
	if v := f.Version(); v.Major() != cnc.Version.Major() {
		return fail(1, "%s: cnc version %v, this ibgo reads %v: driver and tools do not match", f.FilePath(), v, cnc.Version)
	}
	hb := f.DriverHeartbeat()
	if hb == 0 {
		return fail(1, "%s: the driver has not written a heartbeat yet (pid %d): still starting, or not a running driver", f.FilePath(), f.PID())
	}
	age := now.Sub(time.UnixMilli(hb))
	if age > timeout {
		return fail(1, "%s: driver heartbeat is %v old (limit %v; last at %s, pid %d): the driver is dead or stalled",
			f.FilePath(), age.Round(time.Millisecond), timeout, time.UnixMilli(hb).UTC().Format(time.RFC3339Nano), f.PID())
	}
	return nil
}
