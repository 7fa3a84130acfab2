package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// Set at link time by `make dist` (mk/ship.mk):
//
//	-ldflags "-X main.version=v0.3.0 -X main.commit=<sha> -X main.buildDate=<RFC 3339>"
//
// A plain `go build` leaves them empty and version() falls back to what the
// Go toolchain recorded, so a developer build still says what it is.
var (
	version   string
	commit    string
	buildDate string
)

// buildInfo is what `ibgo version` prints.
type buildInfo struct {
	Version, Commit, Date, GoVersion, Platform string
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: buildDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("ibgo %s\ncommit: %s\nbuilt: %s\ngo: %s %s\n", b.Version, b.Commit, b.Date, b.GoVersion, b.Platform)
}

func init() {
	// --version only: -v is taken by subcommands (devinfo -v) and users
	// would expect it to mean verbose at the top level too.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version, commit and build date"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprint(c.App.Writer, currentBuild()) }
	register(&cli.Command{
		Name:  "version",
		Usage: "print ibgo's version, commit, build date, Go version and platform",
		Description: "Prints what `make dist` embedded at link time (a plain `go build` says \"devel\").\n" +
			"The same text is printed by `ibgo --version`; --short prints the version alone.\n\n" +
			"Environment: none.\n\n" +
			"Example:\n   ibgo version --short",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "short", Usage: "print only the version"}},
		Action: func(c *cli.Context) error {
			b := currentBuild()
			if c.Bool("short") {
				fmt.Fprintln(c.App.Writer, b.Version)
				return nil
			}
			fmt.Fprint(c.App.Writer, b)
			return nil
		},
	})
}
