package perftest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ibgo/ibgo/perftest"
)

// Run both sides of ib_write_bw in one process over the device's loopback:
// the server (no Server address) waits for the client on the out-of-band
// TCP port, the client retries until it listens, and each returns
// perftest's report as values (and prints perftest's table to Stdout when
// it is set). Across two hosts, run the server on one and give the
// client's Config the server's address. It needs an RDMA device
// (soft-RoCE will do); TestExamples runs it in the VM tier.
func ExampleRun() {
	ip := os.Getenv("IBGO_VM_IP") // an address of the device's netdev
	if ip == "" {
		ip = "10.0.0.1"
	}
	cfg := perftest.DefaultConfig(perftest.Test{Verb: perftest.Write, Kind: perftest.BW})
	cfg.Port = 19931
	cfg.Size, cfg.SizeGiven = 4096, true
	cfg.Iters = 500
	server, client := cfg, cfg
	client.Server = ip

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := perftest.Run(ctx, server)
		done <- err
	}()
	res, err := perftest.Run(ctx, client)
	if err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	r := res.Records[0]
	fmt.Println(r.Test, r.Role, r.Size, r.Iterations, *r.BWAverage > 0)
	// It prints (checked by TestExamples in the VM):
	//
	//	write_bw client 4096 500 true
}
