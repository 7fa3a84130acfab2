package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

func init() {
	register(&cli.Command{
		Name:  "driver",
		Usage: "run an Aeron media driver in the foreground (the aeronmd of ibgo; media: " + mediaUsage() + ")",
		Description: "Configuration comes from the AERON_* environment variables the C driver reads, with its\n" +
			"defaults; the flags below override them. SIGINT or SIGTERM stop the driver cleanly.\n" +
			"It prints its configuration on start; clients (ibgo's, Aeron's C and Java) connect through\n" +
			"cnc.dat in the Aeron directory.\n\n" +
			"Examples:\n" +
			"   ibgo driver\n" +
			"   AERON_DIR=/dev/shm/aeron ibgo driver --threading-mode SHARED --term-length 16m -v\n\n" +
			"Environment (the main ones; docs/aeron.md lists them all):\n" +
			"   AERON_DIR                            the Aeron directory (default /dev/shm/aeron-$USER)\n" +
			"   AERON_DIR_DELETE_ON_START/_SHUTDOWN  delete the directory on start / on exit\n" +
			"   AERON_TERM_BUFFER_LENGTH             network publication term length\n" +
			"   AERON_IPC_TERM_BUFFER_LENGTH         IPC publication term length\n" +
			"   AERON_MTU_LENGTH, AERON_IPC_MTU_LENGTH\n" +
			"   AERON_THREADING_MODE                 DEDICATED, SHARED_NETWORK or SHARED\n" +
			"   AERON_*_IDLE_STRATEGY                conductor, sender, receiver, shared idle strategies\n" +
			"   AERON_*_IDLE_STRATEGY_INIT_ARGS      their parameters (sleep-ns: 10us; backoff: 10-20-1us-1ms)\n" +
			"   AERON_{CONDUCTOR,SENDER,RECEIVER}_CPU_AFFINITY  pin that agent's thread to a CPU\n" +
			"   AERON_CLIENT_LIVENESS_TIMEOUT, AERON_DRIVER_TIMEOUT, AERON_TIMER_INTERVAL,\n" +
			"   AERON_PUBLICATION_LINGER_TIMEOUT, AERON_PUBLICATION_UNBLOCK_TIMEOUT\n" +
			"   AERON_SOCKET_SO_RCVBUF, AERON_SOCKET_SO_SNDBUF   UDP socket buffers\n" +
			"   AERON_DEBUG_SEND_DATA_LOSS_RATE, AERON_DEBUG_RECEIVE_DATA_LOSS_RATE,\n" +
			"   AERON_DEBUG_DATA_LOSS_SEED           simulated UDP loss, for tests\n" +
			"   IBGO_DEBUG_{SEND,RECEIVE}_DATA_{REORDER,DUPLICATE}_RATE  simulated UDP reordering and\n" +
			"                                        duplication of DATA (ibgo only), for tests\n" +
			"   USER                                 names the default directory",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Aliases: []string{"d"}, Usage: "Aeron directory (AERON_DIR)"},
			&cli.BoolFlag{Name: "dir-delete-on-start", Usage: "delete the directory first, even if a driver is active there (AERON_DIR_DELETE_ON_START)"},
			&cli.BoolFlag{Name: "dir-delete-on-shutdown", Usage: "delete the directory on exit (AERON_DIR_DELETE_ON_SHUTDOWN)"},
			&cli.StringFlag{Name: "term-length", Usage: "network publication term length, e.g. 16m (AERON_TERM_BUFFER_LENGTH)"},
			&cli.StringFlag{Name: "ipc-term-length", Usage: "IPC publication term length, e.g. 64m (AERON_IPC_TERM_BUFFER_LENGTH)"},
			&cli.StringFlag{Name: "mtu", Usage: "MTU of network publications (AERON_MTU_LENGTH)"},
			&cli.StringFlag{Name: "ipc-mtu", Usage: "MTU of IPC publications (AERON_IPC_MTU_LENGTH)"},
			&cli.StringFlag{Name: "threading-mode", Usage: "DEDICATED, SHARED_NETWORK or SHARED (AERON_THREADING_MODE)"},
			&cli.StringFlag{Name: "conductor-idle", Usage: "backoff, spin, yield, noop or sleep-ns[,ns] (AERON_CONDUCTOR_IDLE_STRATEGY)"},
			&cli.StringFlag{Name: "sender-idle", Usage: "idle strategy of the sender in DEDICATED mode (AERON_SENDER_IDLE_STRATEGY)"},
			&cli.StringFlag{Name: "receiver-idle", Usage: "idle strategy of the receiver in DEDICATED mode (AERON_RECEIVER_IDLE_STRATEGY)"},
			&cli.StringFlag{Name: "sharednetwork-idle", Usage: "idle strategy of the sender+receiver in SHARED_NETWORK mode (AERON_SHAREDNETWORK_IDLE_STRATEGY)"},
			&cli.StringFlag{Name: "shared-idle", Usage: "idle strategy of the one agent in SHARED mode (AERON_SHARED_IDLE_STRATEGY)"},
			&cli.StringFlag{Name: "client-liveness-timeout", Usage: "e.g. 10s (AERON_CLIENT_LIVENESS_TIMEOUT)"},
			&cli.StringFlag{Name: "publication-linger-timeout", Usage: "e.g. 5s (AERON_PUBLICATION_LINGER_TIMEOUT)"},
			&cli.StringFlag{Name: "termination-validator", Usage: "deny or allow TERMINATE_DRIVER (AERON_DRIVER_TERMINATION_VALIDATOR)"},
			&cli.StringFlag{Name: "termination-token", Usage: "terminate on a TERMINATE_DRIVER command carrying exactly this token (replaces the validator)"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log client timeouts, unblocks and errors"},
			&cli.StringFlag{Name: "record-commands", Usage: "append every client command to `FILE`, one line each: type id (hex) and the message (hex)"},
		},
		Action: runDriver,
	})
}

// driverMedia are the network media `ibgo driver` serves.
func driverMedia(loss udp.Loss) []driver.Media {
	return []driver.Media{udp.New(loss), ib.New()}
}

// mediaUsage lists the channel media `ibgo driver` serves, for its usage
// text: IPC and the registered network media.
func mediaUsage() string {
	names := []string{"aeron:ipc"}
	for _, m := range driverMedia(udp.Loss{}) {
		names = append(names, "aeron:"+m.Name())
	}
	return strings.Join(names, ", ")
}

// driverConfig applies the flags over the environment: flags win, as an
// explicit command line should.
func driverConfig(c *cli.Context) (driver.Config, error) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for flag, name := range map[string]string{
		"dir": "AERON_DIR", "term-length": "AERON_TERM_BUFFER_LENGTH", "ipc-term-length": "AERON_IPC_TERM_BUFFER_LENGTH",
		"mtu": "AERON_MTU_LENGTH", "ipc-mtu": "AERON_IPC_MTU_LENGTH", "threading-mode": "AERON_THREADING_MODE",
		"conductor-idle": "AERON_CONDUCTOR_IDLE_STRATEGY", "sender-idle": "AERON_SENDER_IDLE_STRATEGY",
		"receiver-idle": "AERON_RECEIVER_IDLE_STRATEGY", "sharednetwork-idle": "AERON_SHAREDNETWORK_IDLE_STRATEGY",
		"shared-idle": "AERON_SHARED_IDLE_STRATEGY", "client-liveness-timeout": "AERON_CLIENT_LIVENESS_TIMEOUT",
		"publication-linger-timeout": "AERON_PUBLICATION_LINGER_TIMEOUT", "termination-validator": "AERON_DRIVER_TERMINATION_VALIDATOR",
	} {
		if c.IsSet(flag) {
			env[name] = c.String(flag)
		}
	}
	if c.Bool("dir-delete-on-start") {
		env["AERON_DIR_DELETE_ON_START"] = "true"
	}
	if c.Bool("dir-delete-on-shutdown") {
		env["AERON_DIR_DELETE_ON_SHUTDOWN"] = "true"
	}
	return driver.ConfigFromEnv(func(k string) string { return env[k] })
}

func runDriver(c *cli.Context) error {
	cfg, err := driverConfig(c)
	if err != nil {
		return fail(1, "%v", err)
	}
	if cfg.ThreadingMode == driver.Invoker {
		// aeron_driver_start refuses it too without a manual main loop:
		// an INVOKER driver runs only when its embedding program calls it.
		return fail(1, "AERON_THREADING_MODE=INVOKER is for a driver embedded in a program that runs it (driver.Driver.DoWork, or client.Options.DriverInvoker); `ibgo driver` would never run it: use DEDICATED, SHARED_NETWORK or SHARED")
	}
	var log io.Writer
	if c.Bool("verbose") {
		log = c.App.ErrWriter
	}
	loss, err := udp.LossFromEnv(nil)
	if err != nil {
		return fail(1, "%v", err)
	}
	opts := []driver.Option{driver.WithLog(log)}
	for _, m := range driverMedia(loss) {
		opts = append(opts, driver.WithMedia(m))
	}
	if c.IsSet("termination-token") {
		opts = append(opts, driver.WithTerminationToken([]byte(c.String("termination-token"))))
	}
	if path := c.String("record-commands"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fail(1, "--record-commands: %v", err)
		}
		defer f.Close()
		opts = append(opts, driver.WithCommandObserver(func(typeID int32, msg []byte) {
			fmt.Fprintf(f, "%x %x\n", typeID, msg)
		}))
	}
	d, err := driver.Start(cfg, opts...)
	if err != nil {
		return fail(1, "%v", err)
	}
	w := c.App.Writer
	media := strings.Join(d.Media(), ",")
	fmt.Fprintf(w, "ibgo media driver (Aeron %s layout, control protocol %s), pid %d\n", driver.Version, driver.ControlProtocolVersion, os.Getpid())
	fmt.Fprintf(w, "dir=%s\n", cfg.Dir)
	switch cfg.ThreadingMode {
	case driver.Shared:
		fmt.Fprintf(w, "threading-mode=%s shared-idle=%s media=%s\n", cfg.ThreadingMode, cfg.SharedIdle, media)
	case driver.SharedNetwork:
		fmt.Fprintf(w, "threading-mode=%s conductor-idle=%s sharednetwork-idle=%s media=%s\n", cfg.ThreadingMode, cfg.ConductorIdle, cfg.SharedNetworkIdle, media)
	default:
		fmt.Fprintf(w, "threading-mode=%s conductor-idle=%s sender-idle=%s receiver-idle=%s media=%s\n",
			cfg.ThreadingMode, cfg.ConductorIdle, cfg.SenderIdle, cfg.ReceiverIdle, media)
	}
	fmt.Fprintf(w, "term-length=%d ipc-term-length=%d mtu=%d ipc-mtu=%d\n", cfg.TermBufferLength, cfg.IPCTermBufferLength, cfg.MTULength, cfg.IPCMTULength)
	fmt.Fprintf(w, "client-liveness-timeout=%v publication-linger-timeout=%v publication-unblock-timeout=%v timer-interval=%v\n",
		cfg.ClientLivenessTimeout, cfg.PublicationLingerTimeout, cfg.PublicationUnblockTimeout, cfg.TimerInterval)
	fmt.Fprintf(w, "to-driver=%d to-clients=%d counters=%d error-log=%d loss-report=%d\n",
		cfg.ToDriverBufferLength, cfg.ToClientsBufferLen, cfg.CounterValuesLength, cfg.ErrorBufferLength, cfg.LossReportLength)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case s := <-sigs:
		fmt.Fprintf(w, "%v: shutting down\n", s)
	case <-d.Terminated():
		fmt.Fprintln(w, "terminated by a client (TERMINATE_DRIVER)")
	}
	if err := d.Close(); err != nil {
		return fail(1, "shutdown: %v", err)
	}
	return nil
}
