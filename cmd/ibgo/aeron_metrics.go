package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/aeron/metrics"
)

func init() {
	aeronSubcommand(&cli.Command{
		Name:  "metrics",
		Usage: "serve a media driver's counters, errors and losses as Prometheus metrics over HTTP",
		Description: "Reads cnc.dat (and loss-report.dat) at every scrape of /metrics, so it follows driver\n" +
			"restarts and works against ibgo's driver and Aeron's C and Java drivers. While no driver\n" +
			"runs, aeron_driver_up is 0. Metric names (stable): aeron_bytes_sent_total and one name per\n" +
			"system counter, aeron_stream_position_bytes{type,session_id,stream_id,channel,registration_id},\n" +
			"aeron_channel_status, aeron_errors_distinct, aeron_error_observations_total,\n" +
			"aeron_loss_bytes_total, aeron_driver_heartbeat_age_seconds; docs/deploy.md lists them all.\n\n" +
			"Example:\n" +
			"   ibgo aeron metrics --listen :9464 --dir /dev/shm/aeron &\n" +
			"   curl -s localhost:9464/metrics | grep aeron_bytes_sent_total\n\n" +
			"Environment:\n" +
			"   AERON_DIR   the Aeron directory when --dir is not given",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Aliases: []string{"d"}, Usage: "Aeron directory holding cnc.dat (default: $AERON_DIR, else " + defaultAeronDir() + ")"},
			&cli.StringFlag{Name: "listen", Value: ":9464", Usage: "address to serve /metrics on"},
		},
		Action: aeronMetrics,
	})
}

func aeronMetrics(c *cli.Context) error {
	dir, _ := aeronDir(c)
	ln, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		return fail(1, "metrics: cannot listen on %s: %v", c.String("listen"), err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(c.App.ErrWriter, "ibgo: serving metrics of the Aeron directory %s on http://%s/metrics\n", dir, ln.Addr())
	if err := serveMetrics(ctx, ln, dir, log.New(c.App.ErrWriter, "ibgo metrics: ", log.LstdFlags)); err != nil {
		return fail(1, "metrics: %v", err)
	}
	return nil
}

// serveMetrics serves /metrics for dir on ln until ctx is done.
func serveMetrics(ctx context.Context, ln net.Listener, dir string, logger *log.Logger) error {
	col := metrics.NewCollector(dir)
	// One line per distinct failure, not one per scrape; scrapes may
	// run concurrently.
	var mu sync.Mutex
	var last string
	col.OnError = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if s := err.Error(); s != last {
			last = s
			logger.Print(s)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(col))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "ibgo aeron metrics for %s: see /metrics\n", dir)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return err
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
