package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// Example publishes and subscribes over aeron:ipc through a media driver
// embedded in the same process in INVOKER mode: the driver has no
// goroutine of its own, and the client, given it as DriverInvoker, runs
// its duty cycles from the client's conductor. No RDMA device is needed.
// Against a standalone driver (`ibgo driver`, or Aeron's aeronmd), leave
// DriverInvoker out and set Dir to the driver's directory.
func Example() {
	dir, err := os.MkdirTemp("", "ibgo-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := driver.DefaultConfig()
	cfg.Dir = dir
	cfg.ThreadingMode = driver.Invoker
	d, err := driver.Start(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.Options{Dir: dir, DriverInvoker: d})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const channel, stream = "aeron:ipc?term-length=64k", 1001
	sub, err := c.AddSubscription(ctx, channel, stream)
	if err != nil {
		log.Fatal(err)
	}
	pub, err := c.AddPublication(ctx, channel, stream)
	if err != nil {
		log.Fatal(err)
	}
	for _, msg := range []string{"hello", "aeron"} {
		for pub.Offer([]byte(msg)) < 0 { // not connected yet, or back pressure
			if ctx.Err() != nil {
				log.Fatal("offer: ", ctx.Err())
			}
			time.Sleep(time.Millisecond)
		}
	}
	for got := 0; got < 2; {
		got += sub.Poll(func(b []byte, h *logbuffer.Header) {
			fmt.Printf("stream %d: %s\n", stream, b)
		}, 10)
		if ctx.Err() != nil {
			log.Fatal("poll: ", ctx.Err())
		}
	}
	// Output:
	// stream 1001: hello
	// stream 1001: aeron
}
