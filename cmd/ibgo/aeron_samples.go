package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
)

// The sample tools, as Aeron ships them (BasicPublisher, BasicSubscriber,
// Ping, Pong, EmbeddedThroughput), working against any media driver through
// its CnC file. They hook into the "aeron" command registered by aeron.go,
// whose init runs first (files are initialised in name order).
func init() {
	var aeron *cli.Command
	for _, c := range commands {
		if c.Name == "aeron" {
			aeron = c
		}
	}
	if aeron == nil {
		panic("aeron_samples.go: the aeron command is not registered yet")
	}
	common := func(stream int) []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "dir", Aliases: []string{"d"}, Usage: "Aeron directory holding cnc.dat (default: $AERON_DIR, else " + defaultAeronDir() + ")"},
			&cli.StringFlag{Name: "channel", Aliases: []string{"c"}, Value: "aeron:ipc", Usage: "channel URI"},
			&cli.IntFlag{Name: "stream", Aliases: []string{"s"}, Value: stream, Usage: "stream id"},
			&cli.DurationFlag{Name: "driver-timeout", Value: 10 * time.Second, Usage: "how long to wait for the driver"},
		}
	}
	aeron.Subcommands = append(aeron.Subcommands,
		&cli.Command{
			Name:  "pub",
			Usage: "publish N messages, each carrying its sequence number (BasicPublisher)",
			Description: "Connects to the media driver, adds a publication on --channel/--stream and offers --messages\n" +
				"messages of --length bytes, each starting with its sequence number, as Aeron's BasicPublisher\n" +
				"does. Pair it with `ibgo aeron sub`.\n\n" +
				"On a network channel it then closes the publication and waits (up to --drain-timeout) until the\n" +
				"driver has sent everything and let the publication go; it exits 4 if the driver ended it with bytes\n" +
				"unsent (every receiver went away, or the driver stopped): such loss is never silent.\n\n" +
				"Example:\n" +
				"   ibgo aeron pub --channel aeron:udp?endpoint=localhost:40456 --stream 1001 -n 100\n\n" +
				"Environment:\n" + aeronClientEnv,
			Flags: append(common(1001),
				&cli.IntFlag{Name: "messages", Aliases: []string{"n"}, Value: 10, Usage: "messages to send"},
				&cli.IntFlag{Name: "length", Aliases: []string{"l"}, Value: 32, Usage: "message length in bytes (at least 8)"},
				&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "give up when one message cannot be offered for this long"},
				&cli.BoolFlag{Name: "exclusive", Usage: "use an exclusive publication"},
				&cli.DurationFlag{Name: "drain-timeout", Value: time.Minute, Usage: "wait this long for the driver to send everything offered (0: do not wait)"},
			),
			Action: aeronPub,
		},
		&cli.Command{
			Name:  "sub",
			Usage: "receive N messages and check their sequence numbers (BasicSubscriber)",
			Description: "Connects to the media driver, adds a subscription on --channel/--stream and polls until\n" +
				"--messages messages have arrived, failing if a sequence number is out of order, as Aeron's\n" +
				"BasicSubscriber does (plus the check). Pair it with `ibgo aeron pub`. It exits 3 when the publisher's\n" +
				"image ends (goes unavailable) before --messages arrived: the stream ended short.\n\n" +
				"Example:\n" +
				"   ibgo aeron sub --channel aeron:udp?endpoint=localhost:40456 --stream 1001 -n 100\n" +
				"      received 100 messages in order\n\n" +
				"Environment:\n" + aeronClientEnv,
			Flags: append(common(1001),
				&cli.IntFlag{Name: "messages", Aliases: []string{"n"}, Value: 10, Usage: "messages to receive"},
				&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "fail when no message arrives for this long"},
			),
			Action: aeronSub,
		},
		&cli.Command{
			Name:  "ping",
			Usage: "measure round-trip latency against `ibgo aeron pong` (Ping)",
			Description: "Sends --messages pings of --length bytes on --channel/--stream after --warmup unmeasured\n" +
				"ones, waits for each echo from `ibgo aeron pong` on --pong-channel/--pong-stream, and prints\n" +
				"the round-trip time percentiles, as Aeron's Ping sample does.\n\n" +
				"Example (start `ibgo aeron pong` first, on the same driver):\n" +
				"   ibgo aeron ping -n 100000 --warmup 10000 -l 32\n" +
				"      rtt min=… p50=… p90=… p99=… p99.9=… max=…\n\n" +
				"Environment:\n" + aeronClientEnv,
			Flags: append(common(1002),
				&cli.StringFlag{Name: "pong-channel", Value: "aeron:ipc", Usage: "channel pongs come back on"},
				&cli.IntFlag{Name: "pong-stream", Value: 1003, Usage: "stream pongs come back on"},
				&cli.IntFlag{Name: "messages", Aliases: []string{"n"}, Value: 100000, Usage: "measured round trips"},
				&cli.IntFlag{Name: "warmup", Value: 10000, Usage: "round trips before measuring"},
				&cli.IntFlag{Name: "length", Aliases: []string{"l"}, Value: 32, Usage: "message length (at least 8)"},
			),
			Action: aeronPing,
		},
		&cli.Command{
			Name:  "pong",
			Usage: "echo every ping back until interrupted (Pong)",
			Description: "Subscribes to --channel/--stream and echoes every message back on --pong-channel/--pong-stream\n" +
				"until interrupted (or --messages echoes), as Aeron's Pong sample does; `ibgo aeron ping`\n" +
				"measures against it.\n\n" +
				"Example:\n" +
				"   ibgo aeron pong --channel aeron:ipc --stream 1002 --pong-stream 1003\n\n" +
				"Environment:\n" + aeronClientEnv,
			Flags: append(common(1002),
				&cli.StringFlag{Name: "pong-channel", Value: "aeron:ipc", Usage: "channel to echo on"},
				&cli.IntFlag{Name: "pong-stream", Value: 1003, Usage: "stream to echo on"},
				&cli.IntFlag{Name: "messages", Aliases: []string{"n"}, Usage: "exit after echoing this many (0: until interrupted)"},
			),
			Action: aeronPong,
		},
		&cli.Command{
			Name:  "throughput",
			Usage: "publisher and rate-reporting subscriber in one process: messages/s and bytes/s (EmbeddedThroughput)",
			Description: "Publishes --messages messages of --length bytes as fast as the publication takes them while a\n" +
				"subscriber in the same process counts them, and prints messages/s and bytes/s, as Aeron's\n" +
				"EmbeddedThroughput does. With --embedded it starts an ibgo media driver in this process\n" +
				"(configured from AERON_*, in a temporary directory unless --dir).\n\n" +
				"--role pub or --role sub runs one half, for two processes as Aeron's StreamingPublisher and\n" +
				"RateSubscriber: the publisher offers --messages and reports its rate (it waits for a\n" +
				"subscriber first), the subscriber counts --messages and reports its own. Each runs on one P\n" +
				"(GOMAXPROCS=1) unless GOMAXPROCS says otherwise, as the sample runs on one thread.\n\n" +
				"Examples:\n" +
				"   ibgo aeron throughput --embedded -n 10000000 -l 256\n" +
				"   ibgo aeron throughput --role sub -n 10000000 & ibgo aeron throughput --role pub -n 10000000 -l 256\n\n" +
				"Environment:\n" + aeronClientEnv + "\n" +
				"   AERON_*               with --embedded, the driver's settings (AERON_TERM_BUFFER_LENGTH, AERON_MTU_LENGTH,\n" +
				"                         AERON_THREADING_MODE...; docs/aeron.md lists them all)",
			Flags: append(common(1001),
				&cli.IntFlag{Name: "messages", Aliases: []string{"n"}, Value: 10_000_000, Usage: "messages to send"},
				&cli.IntFlag{Name: "length", Aliases: []string{"l"}, Value: 256, Usage: "message length"},
				&cli.BoolFlag{Name: "exclusive", Usage: "use an exclusive publication"},
				&cli.BoolFlag{Name: "embedded", Usage: "start an ibgo driver in this process (in a temporary directory unless --dir)"},
				&cli.StringFlag{Name: "role", Value: "both", Usage: "both, pub (publisher only) or sub (subscriber only)"},
			),
			Action: aeronThroughput,
		},
	)
}

// aeronClientEnv is the Environment entry of the sample clients: the
// directory as aeronDir finds it, and what client.Connect reads.
const aeronClientEnv = aeronDirEnv + "\n" +
	"   AERON_CLIENT_NAME     the client name shown in the driver's client-heartbeat counter\n" +
	"   AERON_DRIVER_TIMEOUT  driver timeout in ms, only with --driver-timeout 0"

func sampleClient(c *cli.Context) (*client.Client, error) {
	dir, _ := aeronDir(c)
	cl, err := client.Connect(c.Context, client.Options{Dir: dir, DriverTimeout: c.Duration("driver-timeout")})
	if err != nil {
		return nil, fail(1, "%v", err)
	}
	return cl, nil
}

// pingPongStreams reads the ping and pong stream ids.
func pingPongStreams(c *cli.Context) (ping, pong int32, err error) {
	if ping, err = streamID(c, "stream"); err != nil {
		return 0, 0, err
	}
	pong, err = streamID(c, "pong-stream")
	return ping, pong, err
}

// pingPongPair connects a client with a subscription on (subCh, subStream)
// and an exclusive publication on (pubCh, pubStream): ping and pong are the
// same pair with the streams swapped.
func pingPongPair(c *cli.Context, subCh string, subStream int32, pubCh string, pubStream int32) (*client.Client, *client.Subscription, *client.Publication, error) {
	cl, err := sampleClient(c)
	if err != nil {
		return nil, nil, nil, err
	}
	sub, err := cl.AddSubscription(c.Context, subCh, subStream)
	if err != nil {
		cl.Close()
		return nil, nil, nil, fail(1, "add subscription: %v", err)
	}
	pub, err := cl.AddExclusivePublication(c.Context, pubCh, pubStream)
	if err != nil {
		cl.Close()
		return nil, nil, nil, fail(1, "add publication: %v", err)
	}
	return cl, sub, pub, nil
}

func streamID(c *cli.Context, name string) (int32, error) {
	v := c.Int(name)
	if v < -1<<31 || v >= 1<<31 {
		return 0, fail(1, "--%s %d is not an int32", name, v)
	}
	return int32(v), nil
}

func aeronPub(c *cli.Context) error {
	n, length := c.Int("messages"), c.Int("length")
	if length < 8 || n < 0 {
		return fail(1, "--length must be at least 8 (the sequence number) and --messages not negative")
	}
	stream, err := streamID(c, "stream")
	if err != nil {
		return err
	}
	cl, err := sampleClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	add := cl.AddPublication
	if c.Bool("exclusive") {
		add = cl.AddExclusivePublication
	}
	pub, err := add(c.Context, c.String("channel"), stream)
	if err != nil {
		return fail(1, "add publication: %v", err)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "publishing %d messages of %d bytes to %s stream %d (session %d)\n", n, length, c.String("channel"), stream, pub.SessionID())
	msg := make([]byte, length)
	timeout := c.Duration("timeout")
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		start := time.Now()
		for {
			r := pub.Offer(msg)
			if r > 0 {
				break
			}
			switch r {
			case client.BackPressured, client.AdminAction, client.NotConnected:
				if time.Since(start) > timeout {
					return fail(1, "message %d: still %s after %v", i, client.ResultString(r), timeout)
				}
				runtime.Gosched()
			default:
				return fail(1, "message %d: offer failed: %s", i, client.ResultString(r))
			}
		}
	}
	final := pub.Position()
	fmt.Fprintf(w, "offered %d messages, position %d\n", n, final)
	if d := c.Duration("drain-timeout"); d > 0 {
		return awaitDrain(w, cl, pub, final, d)
	}
	return nil
}

// awaitDrain closes a network publication and watches its snd-pos counter
// (the driver's publication: OriginalRegistrationID, which a shared
// publication's clients have in common) until the driver sent everything
// this run offered, or let the publication go: then the last snd-pos says
// how much never left (every receiver went away, or the driver stopped).
// IPC publications have no snd-pos: nothing to wait for.
func awaitDrain(w io.Writer, cl *client.Client, pub *client.Publication, final int64, timeout time.Duration) error {
	regID := pub.OriginalRegistrationID()
	r := cl.Counters()
	id := r.FindByTypeIDAndRegistrationID(cnc.TypeSenderPosition, regID)
	if id < 0 {
		return nil
	}
	if err := pub.Close(); err != nil {
		return fail(1, "close publication: %v", err)
	}
	live := func() bool {
		return r.CounterState(id) == cnc.RecordAllocated && r.RegistrationID(id) == regID && r.CounterTypeID(id) == cnc.TypeSenderPosition
	}
	sent := r.CounterValue(id)
	deadline := time.Now().Add(timeout)
	for sent < final {
		if !live() {
			// a freed counter keeps its last value until it is reused
			// (which the driver delays): read it once more
			if v := r.CounterValue(id); r.CounterTypeID(id) == cnc.TypeSenderPosition && r.RegistrationID(id) == regID {
				sent = max(sent, v)
			}
			if sent >= final {
				break
			}
			return fail(4, "LOSS: the driver ended publication %d with %d bytes unsent (sent to position %d of %d): "+
				"no receiver was left, or the driver stopped (its error log says which: ibgo aeron errors)", regID, final-sent, sent, final)
		}
		if time.Now().After(deadline) {
			return fail(4, "the driver was still sending publication %d after %v: sent %d of %d bytes", regID, timeout, sent, final)
		}
		if err := cl.Err(); err != nil {
			return fail(4, "publication %d: %v; sent %d of %d bytes", regID, err, sent, final)
		}
		time.Sleep(5 * time.Millisecond)
		sent = max(sent, r.CounterValue(id))
	}
	fmt.Fprintf(w, "drained: the driver sent all %d bytes\n", final)
	return nil
}

func aeronSub(c *cli.Context) error {
	n := c.Int("messages")
	stream, err := streamID(c, "stream")
	if err != nil {
		return err
	}
	cl, err := sampleClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	// an image goes unavailable only once this subscription read all the
	// driver had of it: the image that delivered messages going before n
	// arrived ended short (another one, e.g. an old session's end, does not
	// count)
	var ended atomic.Int32
	var endedSession, deliveringSession atomic.Int64
	deliveringSession.Store(-1 << 40)
	sub, err := cl.AddSubscriptionWithHandlers(c.Context, c.String("channel"), stream, nil, func(img *client.Image) {
		if int64(img.SessionID()) == deliveringSession.Load() {
			endedSession.Store(int64(img.SessionID()))
			ended.Add(1)
		}
	})
	if err != nil {
		return fail(1, "add subscription: %v", err)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "subscribed to %s stream %d, waiting for %d messages\n", c.String("channel"), stream, n)
	var next uint64
	var bad error
	asm := client.NewFragmentAssembler(func(p []byte, h *client.Header) {
		if bad != nil {
			return
		}
		if len(p) < 8 {
			bad = fail(2, "message %d: %d bytes, too short for a sequence number", next, len(p))
			return
		}
		switch seq := binary.LittleEndian.Uint64(p); {
		case seq == next:
			next++
			deliveringSession.Store(int64(h.SessionID()))
		case seq > next:
			bad = fail(2, "gap: expected message %d, got %d (session %d)", next, seq, h.SessionID())
		default:
			bad = fail(2, "duplicate: expected message %d, got %d again (session %d)", next, seq, h.SessionID())
		}
	})
	handler := asm.Handler()
	timeout := c.Duration("timeout")
	last := time.Now()
	for int(next) < n && bad == nil {
		if sub.Poll(handler, 100) > 0 {
			last = time.Now()
			continue
		}
		if err := cl.Err(); err != nil {
			return fail(3, "%v", err)
		}
		if ended.Load() > 0 && sub.Poll(handler, 100) == 0 {
			return fail(3, "LOSS: the image of session %d went unavailable after %d of %d messages: the stream ended short "+
				"(the publisher's driver stopped, or lost its receivers; its error log says which: ibgo aeron errors)", endedSession.Load(), next, n)
		}
		if time.Since(last) > timeout {
			return fail(3, "timeout: no message for %v after %d of %d messages", timeout, next, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if bad != nil {
		return bad
	}
	fmt.Fprintf(w, "received %d messages in order\n", n)
	return nil
}

func aeronPing(c *cli.Context) error {
	n, warm, length := c.Int("messages"), c.Int("warmup"), c.Int("length")
	if length < 8 || n <= 0 || warm < 0 {
		return fail(1, "--length must be at least 8 and --messages positive")
	}
	ping, pong, err := pingPongStreams(c)
	if err != nil {
		return err
	}
	cl, sub, pub, err := pingPongPair(c, c.String("pong-channel"), pong, c.String("channel"), ping)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := c.App.Writer
	fmt.Fprintf(w, "ping %s stream %d, pong %s stream %d: waiting for pong\n", c.String("channel"), ping, c.String("pong-channel"), pong)
	start := time.Now()
	for !pub.IsConnected() || !sub.IsConnected() {
		if time.Since(start) > c.Duration("driver-timeout") {
			return fail(1, "no pong connected after %v: is `ibgo aeron pong` running?", c.Duration("driver-timeout"))
		}
		time.Sleep(time.Millisecond)
	}
	rtts := make([]time.Duration, 0, n)
	msg := make([]byte, length)
	epoch := time.Now()
	var got bool // set by the handler, which Poll runs on this goroutine
	var rtt time.Duration
	handler := client.NewFragmentAssembler(func(p []byte, _ *client.Header) {
		rtt = time.Since(epoch) - time.Duration(binary.LittleEndian.Uint64(p))
		got = true
	}).Handler()
	var gc gcProbe
	for i := 0; i < warm+n; i++ {
		if i == warm {
			gc = readGC() // the measured round trips start here
		}
		binary.LittleEndian.PutUint64(msg, uint64(time.Since(epoch)))
		for pub.Offer(msg) < 0 {
			if !pub.IsConnected() {
				return fail(1, "pong went away")
			}
		}
		got = false
		for spins := 0; !got; spins++ {
			if sub.Poll(handler, 1) == 0 && spins&0xffff == 0xffff && !sub.IsConnected() {
				return fail(1, "pong went away after %d round trips", i)
			}
		}
		if i >= warm {
			rtts = append(rtts, rtt)
		}
	}
	gcLine := gc.since()
	slices.Sort(rtts)
	q := func(p float64) time.Duration { return rtts[min(len(rtts)-1, int(p*float64(len(rtts))))] }
	fmt.Fprintf(w, "round trips: %d of %d bytes (after %d warm-up)\n", n, length, warm)
	fmt.Fprintf(w, "rtt min=%v p50=%v p90=%v p99=%v p99.9=%v max=%v\n", rtts[0], q(0.5), q(0.9), q(0.99), q(0.999), rtts[len(rtts)-1])
	fmt.Fprintln(w, gcLine)
	return nil
}

func aeronPong(c *cli.Context) error {
	ping, pong, err := pingPongStreams(c)
	if err != nil {
		return err
	}
	cl, sub, pub, err := pingPongPair(c, c.String("channel"), ping, c.String("pong-channel"), pong)
	if err != nil {
		return err
	}
	defer cl.Close()
	fmt.Fprintf(c.App.Writer, "pong: echoing %s stream %d to %s stream %d\n", c.String("channel"), ping, c.String("pong-channel"), pong)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	defer signal.Stop(stop)
	limit := c.Int("messages")
	echoed := 0
	handler := client.NewFragmentAssembler(func(p []byte, _ *client.Header) {
		for pub.Offer(p) < 0 {
			if pub.IsClosed() {
				return
			}
		}
		echoed++
	}).Handler()
	for idle := 0; limit == 0 || echoed < limit; {
		if sub.Poll(handler, 10) > 0 {
			idle = 0
			continue
		}
		if idle++; idle&0xffff == 0 {
			select {
			case <-stop:
				fmt.Fprintf(c.App.Writer, "echoed %d\n", echoed)
				return nil
			default:
			}
			if err := cl.Err(); err != nil {
				return fail(1, "%v", err)
			}
		}
	}
	return nil
}

func aeronThroughput(c *cli.Context) error {
	n, length := c.Int("messages"), c.Int("length")
	if length < 8 || n <= 0 {
		return fail(1, "--length must be at least 8 and --messages positive")
	}
	stream, err := streamID(c, "stream")
	if err != nil {
		return err
	}
	role := c.String("role")
	if role != "both" && role != "pub" && role != "sub" {
		return fail(1, "--role %q: both, pub or sub", role)
	}
	if role != "both" && os.Getenv("GOMAXPROCS") == "" {
		// one hot loop, as Aeron's sample's one thread: on one P no idle
		// P wakes a spinning thread beside it whenever the client
		// conductor or a timer runs (measured: 5.9 against 8.4 M msg/s
		// with publisher, subscriber and driver on two CPUs)
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	if c.Bool("embedded") {
		cfg, err := driver.ConfigFromEnv(nil)
		if err != nil {
			return fail(1, "%v", err)
		}
		if c.IsSet("dir") {
			cfg.Dir = c.String("dir")
		} else {
			tmp, err := os.MkdirTemp("", "ibgo-throughput-")
			if err != nil {
				return fail(1, "%v", err)
			}
			defer os.RemoveAll(tmp)
			cfg.Dir = filepath.Join(tmp, "aeron")
			c.Set("dir", cfg.Dir)
		}
		d, err := driver.Start(cfg)
		if err != nil {
			return fail(1, "%v", err)
		}
		defer d.Close()
	}
	cl, err := sampleClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := c.App.Writer
	if role == "sub" {
		return throughputSubscriber(c, cl, stream, n, w)
	}
	var sub *client.Subscription
	if role == "both" {
		if sub, err = cl.AddSubscription(c.Context, c.String("channel"), stream); err != nil {
			return fail(1, "add subscription: %v", err)
		}
	}
	add := cl.AddPublication
	if c.Bool("exclusive") {
		add = cl.AddExclusivePublication
	}
	pub, err := add(c.Context, c.String("channel"), stream)
	if err != nil {
		return fail(1, "add publication: %v", err)
	}
	for !pub.IsConnected() || (sub != nil && !sub.IsConnected()) {
		if err := c.Context.Err(); err != nil {
			return fail(1, "waiting for a subscriber: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if sub == nil {
		return throughputPublisher(pub, n, length, w)
	}
	var received atomic.Int64
	var bytes atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var count, total int64
		handler := func(p []byte, _ *client.Header) { count++; total += int64(len(p)) }
		for count < int64(n) {
			if sub.Poll(handler, 256) == 0 {
				runtime.Gosched()
			}
			received.Store(count)
			bytes.Store(total)
		}
	}()
	gc := readGC()
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	msg := make([]byte, length)
	lastCount, lastTime := int64(0), start
	backPressured := 0
	for i := 0; i < n; i++ {
		for pub.Offer(msg) < 0 {
			backPressured++
			runtime.Gosched()
		}
		if i&0xfff == 0 {
			select {
			case now := <-tick.C:
				cnt := received.Load()
				fmt.Fprintf(w, "%.3f M msg/s, %.1f MB/s\n", float64(cnt-lastCount)/now.Sub(lastTime).Seconds()/1e6,
					float64(cnt-lastCount)*float64(length)/now.Sub(lastTime).Seconds()/1e6)
				lastCount, lastTime = cnt, now
			default:
			}
		}
	}
	<-done
	el := time.Since(start)
	fmt.Fprintf(w, "total: %d messages of %d bytes in %v: %.3f M msg/s, %.1f MB/s (%d back-pressured offers)\n",
		n, length, el.Round(time.Millisecond), float64(n)/el.Seconds()/1e6, float64(bytes.Load())/el.Seconds()/1e6, backPressured)
	fmt.Fprintln(w, gc.since())
	return nil
}

// throughputPublisher is --role pub: offer n messages of length bytes as
// fast as the publication takes them and report the publisher's rate over
// all of them, as Aeron's StreamingPublisher reports its total.
func throughputPublisher(pub *client.Publication, n, length int, w io.Writer) error {
	msg := make([]byte, length)
	backPressured := 0
	gc := readGC()
	start := time.Now()
	for i := 0; i < n; i++ {
		for {
			r := pub.Offer(msg)
			if r >= 0 {
				break
			}
			if r == client.NotConnected {
				// the subscriber went away: nobody will take the rest
				return fail(1, "offered %d of %d messages: the subscriber went away (NOT_CONNECTED)", i, n)
			}
			backPressured++
			runtime.Gosched()
		}
	}
	el := time.Since(start)
	fmt.Fprintf(w, "total: %d messages of %d bytes in %v: %.3f M msg/s, %.1f MB/s (%d back-pressured offers)\n",
		n, length, el.Round(time.Millisecond), float64(n)/el.Seconds()/1e6, float64(n)*float64(length)/el.Seconds()/1e6, backPressured)
	fmt.Fprintln(w, gc.since())
	return nil
}

// throughputSubscriber is --role sub: count n messages from the first one
// and report the subscriber's rate, as Aeron's RateSubscriber does.
func throughputSubscriber(c *cli.Context, cl *client.Client, stream int32, n int, w io.Writer) error {
	sub, err := cl.AddSubscription(c.Context, c.String("channel"), stream)
	if err != nil {
		return fail(1, "add subscription: %v", err)
	}
	var count, total int64
	var start time.Time
	var gc gcProbe
	handler := func(p []byte, _ *client.Header) {
		if count == 0 {
			gc, start = readGC(), time.Now()
		}
		count++
		total += int64(len(p))
	}
	for count < int64(n) {
		if sub.Poll(handler, int(min(256, int64(n)-count))) == 0 {
			if err := c.Context.Err(); err != nil {
				return fail(1, "received %d of %d messages: %v", count, n, err)
			}
			if err := cl.Err(); err != nil {
				return fail(1, "%v", err)
			}
			runtime.Gosched()
		}
	}
	el := time.Since(start)
	fmt.Fprintf(w, "subscriber total: %d messages, %d bytes in %v: %.3f M msg/s, %.1f MB/s\n",
		count, total, el.Round(time.Millisecond), float64(count)/el.Seconds()/1e6, float64(total)/el.Seconds()/1e6)
	fmt.Fprintln(w, gc.since())
	return nil
}

// gcProbe is the Go runtime's collection count and allocated bytes at one
// moment: a run prints what happened between two (issue 34: a steady state
// that allocates nothing runs no collection while it measures).
type gcProbe struct {
	cycles uint32
	bytes  uint64
}

func readGC() gcProbe {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return gcProbe{m.NumGC, m.TotalAlloc}
}

// since says how many collections ran and how much this process allocated
// since p (every goroutine's, the embedded driver's too).
func (p gcProbe) since() string {
	q := readGC()
	return fmt.Sprintf("gc: %d cycles, %d bytes allocated during the run (the whole process)", q.cycles-p.cycles, q.bytes-p.bytes)
}
