package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/inspect"
	"github.com/ibgo/ibgo/internal/shm"
)

func init() {
	dirFlag := &cli.StringFlag{
		Name:    "dir",
		Aliases: []string{"d"},
		Usage:   "Aeron directory holding cnc.dat (default: $AERON_DIR, else " + defaultAeronDir() + ")",
	}
	register(&cli.Command{
		Name:  "aeron",
		Usage: "inspect Aeron traffic and media drivers: decode captures, AeronStat, ErrorStat, LossStat",
		Description: "Tools for Aeron media drivers (ibgo's and Aeron's C and Java drivers) and Aeron traffic:\n" +
			"reading a driver's cnc.dat, error log and loss report, health and Prometheus metrics, the\n" +
			"sample clients (pub, sub, ping, pong, throughput) and a pcap decoder.\n" +
			"`ibgo aeron <command> --help` describes each.\n\n" +
			"Examples:\n" +
			"   ibgo aeron stat --watch\n" +
			"   ibgo aeron decode --port 40456 capture.pcap\n\n" +
			"Environment:\n" +
			aeronDirEnv,
		Subcommands: []*cli.Command{
			{
				Name:      "decode",
				Usage:     "print every Aeron frame of a packet capture (pcap or pcapng, optionally gzipped), one line each",
				ArgsUsage: "FILE.pcap",
				Description: "Reads a classic pcap or pcapng capture (tcpdump -w, Wireshark; .gz too), takes the UDP\n" +
					"datagrams in it and prints each Aeron frame they carry on one line: time, frame type, flags,\n" +
					"session, stream, term id and offset, length, the type's own fields, packet number and\n" +
					"addresses. Frames that cannot be decoded print as MALFORMED lines. Needs no driver.\n\n" +
					"Example:\n" +
					"   tcpdump -i lo -w aeron.pcap udp port 40456\n" +
					"   ibgo aeron decode --port 40456 aeron.pcap\n\n" +
					"Environment: none.",
				Flags: []cli.Flag{
					&cli.UintFlag{Name: "port", Usage: "only datagrams from or to this UDP port"},
				},
				Action: aeronDecode,
			},
			{
				Name:  "stat",
				Usage: "print a media driver's CnC header and counters, as AeronStat does",
				Description: "Maps the driver's cnc.dat read-only and prints its header (CnC version, PID, heartbeat age) and\n" +
					"every allocated counter with its id, value and label, as Aeron's AeronStat tool does.\n" +
					"With --watch it redraws every --interval until interrupted (or --count updates).\n\n" +
					"Examples:\n" +
					"   ibgo aeron stat\n" +
					"      2026-12-02 17:20:03.917+0000 - Aeron Stat (CnC v0.2.0), pid 30052, heartbeat age 188ms\n" +
					"      ===========================\n" +
					"        0 :            3,024,064 - Bytes sent\n" +
					"   ibgo aeron stat --dir /dev/shm/aeron --watch --interval 2s\n\n" +
					"Environment:\n" +
					aeronDirEnv,
				Flags: []cli.Flag{
					dirFlag,
					&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "redraw every --interval until interrupted"},
					&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "refresh period with --watch"},
					&cli.IntFlag{Name: "count", Usage: "with --watch, stop after this many updates (0: until interrupted)"},
				},
				Action: aeronStat,
			},
			{
				Name:  "errors",
				Usage: "print a media driver's distinct error log, as ErrorStat does",
				Description: "Reads the distinct error log in the driver's cnc.dat and prints each error with its\n" +
					"observation count and first and last times, as Aeron's ErrorStat tool does.\n\n" +
					"Example:\n" +
					"   ibgo aeron errors --dir /dev/shm/aeron\n\n" +
					"Environment:\n" +
					aeronDirEnv,
				Flags:  []cli.Flag{dirFlag},
				Action: aeronErrors,
			},
			{
				Name:  "loss",
				Usage: "print a media driver's loss report (loss-report.dat), as LossStat does",
				Description: "Maps loss-report.dat from the Aeron directory and prints each loss entry (observations,\n" +
					"bytes lost, first and last times, session, stream, channel, source), as Aeron's LossStat does.\n\n" +
					"Example:\n" +
					"   ibgo aeron loss --dir /dev/shm/aeron\n\n" +
					"Environment:\n" +
					aeronDirEnv,
				Flags:  []cli.Flag{dirFlag},
				Action: aeronLoss,
			},
		},
	})
}

// aeronDirEnv is the Environment entry of every command that finds the
// Aeron directory with aeronDir.
const aeronDirEnv = "   AERON_DIR             the Aeron directory when --dir is not given\n" +
	"   USER                  names the default directory (aeron-<user>) when neither is set"

// defaultAeronDir is aeron_default_path as the driver and the client
// resolve it (cnc.DefaultDir).
func defaultAeronDir() string { return cnc.DefaultDir() }

// aeronDir resolves the directory from --dir, AERON_DIR or the default, and
// says which one it used, for error messages.
func aeronDir(c *cli.Context) (dir, from string) {
	if d := c.String("dir"); d != "" {
		return d, "from --dir"
	}
	if d := os.Getenv("AERON_DIR"); d != "" {
		return d, "from AERON_DIR"
	}
	return defaultAeronDir(), "the default; set AERON_DIR or --dir to choose another"
}

func openCnC(c *cli.Context) (*cnc.File, error) {
	dir, from := aeronDir(c)
	path := cnc.Path(dir)
	f, err := cnc.OpenFile(path, false)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail(1, "no CnC file at %s (Aeron directory %s, %s): is a media driver running there?", path, dir, from)
	case errors.Is(err, cnc.ErrNotReady):
		return nil, fail(1, "CnC file %s is not initialised yet (cnc_version 0): the media driver is still starting", path)
	}
	return nil, fail(1, "%v", err)
}

func aeronDecode(c *cli.Context) error {
	if c.NArg() != 1 {
		return fail(1, "usage: ibgo aeron decode [--port N] FILE.pcap\n"+
			"FILE is a pcap or pcapng capture of UDP traffic, e.g. from `tcpdump -i lo -w FILE udp port 40456`")
	}
	path := c.Args().First()
	port := c.Uint("port")
	if port > 65535 {
		return fail(1, "--port %d is not a UDP port (1..65535)", port)
	}
	file, err := os.Open(path)
	if err != nil {
		return fail(1, "cannot read capture: %v", err)
	}
	defer file.Close()
	_, err = inspect.Decode(c.App.Writer, file, inspect.DecodeOptions{Port: uint16(port)})
	switch {
	case err == nil:
		return nil
	case inspect.IsNotCapture(err):
		return fail(1, "%s is not a packet capture: %v\nibgo reads classic pcap and pcapng files (tcpdump -w, Wireshark), optionally gzipped", path, err)
	}
	return fail(1, "%s: %v", path, err)
}

func aeronStat(c *cli.Context) error {
	f, err := openCnC(c)
	if err != nil {
		return err
	}
	defer f.Close()
	w := c.App.Writer
	if !c.Bool("watch") {
		return statOnce(w, f)
	}
	interval := c.Duration("interval")
	if interval <= 0 {
		return fail(1, "--interval %v must be positive", interval)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	defer signal.Stop(stop)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		fmt.Fprint(w, "\033[2J\033[H") // clear the screen, as aeron_stat does
		if err := statOnce(w, f); err != nil {
			return err
		}
		if count := c.Int("count"); count > 0 && n >= count {
			return nil
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}

func statOnce(w io.Writer, f *cnc.File) error {
	if err := inspect.Stat(w, f, time.Now(), time.Local); err != nil {
		return fail(1, "%s: %v", f.FilePath(), err)
	}
	return nil
}

func aeronErrors(c *cli.Context) error {
	f, err := openCnC(c)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := inspect.Errors(c.App.Writer, f, time.Local); err != nil {
		return fail(1, "%s: %v", f.FilePath(), err)
	}
	return nil
}

func aeronLoss(c *cli.Context) error {
	dir, from := aeronDir(c)
	path := cnc.LossReportPath(dir)
	m, err := shm.Map(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(1, "no loss report at %s (Aeron directory %s, %s): is a media driver running there?", path, dir, from)
	}
	if err != nil {
		return fail(1, "cannot map loss report: %v", err)
	}
	defer m.Close()
	if _, err := inspect.Loss(c.App.Writer, m.Bytes(), time.Local); err != nil {
		return fail(1, "%s: %v", path, err)
	}
	return nil
}
