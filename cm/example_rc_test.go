package cm_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// exampleAddr is an IP of an RDMA device's netdev and a port: the VM
// harness's guest exports its address as IBGO_VM_IP.
func exampleAddr(port string) string {
	ip := os.Getenv("IBGO_VM_IP")
	if ip == "" {
		ip = "10.0.0.1"
	}
	return ip + ":" + port
}

// A reliable connection in one process: a Listener accepts, a Dial
// connects, and each side sends one message the other receives. Each side
// posts its receive before the peer can send (ListenConfig.BeforeAccept,
// Dialer.BeforeConnect). It needs an RDMA device (soft-RoCE will do);
// TestExamples runs it in the VM tier.
func ExampleListenConfig_Listen() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, err := cm.ParseAddr(exampleAddr("7471"))
	if err != nil {
		log.Fatal(err)
	}
	// one registered buffer per side: receive at 0, send from 512
	type side struct {
		mem *uverbs.Memory
		mr  *uverbs.MR
	}
	prepare := func(s *side) func(c *cm.Conn) error {
		return func(c *cm.Conn) error {
			var err error
			if s.mem, err = uverbs.AllocMemory(4096, uverbs.MemoryOptions{}); err != nil {
				return err
			}
			if s.mr, err = c.PD().RegMR(s.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
				return err
			}
			_, err = c.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{s.mr.SGE(0, 512)}}})
			return err
		}
	}
	var srvSide, cliSide side
	lc := cm.ListenConfig{BeforeAccept: prepare(&srvSide)}
	l, err := lc.Listen(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *cm.Conn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		accepted <- c
	}()
	cli, err := (&cm.Dialer{BeforeConnect: prepare(&cliSide)}).Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	srv := <-accepted
	defer srv.Close()
	for _, s := range []*side{&srvSide, &cliSide} {
		defer s.mem.Close()
		defer s.mr.Close()
	}

	// send, then wait for the peer's receive completion
	exchange := func(from, to *cm.Conn, fs, ts *side, msg string) {
		n := copy(fs.mem.Bytes()[512:], msg)
		wr := []uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{fs.mr.SGE(512, n)}}}
		if _, err := from.QP().PostSend(wr); err != nil {
			log.Fatal(err)
		}
		wc := make([]uverbs.WC, 1)
		for _, cq := range []*uverbs.CQ{from.SendCQ(), to.RecvCQ()} {
			for {
				k, err := cq.Poll(wc)
				if err != nil {
					log.Fatal(err)
				}
				if k == 1 {
					if wc[0].Status != uverbs.WCSuccess {
						log.Fatal(wc[0].Status)
					}
					break
				}
				if ctx.Err() != nil {
					log.Fatal(ctx.Err())
				}
			}
		}
		fmt.Printf("received %q (%d bytes)\n", ts.mem.Bytes()[:wc[0].ByteLen], wc[0].ByteLen)
	}
	exchange(cli, srv, &cliSide, &srvSide, "ping")
	exchange(srv, cli, &srvSide, &cliSide, "pong!")
	// It prints (checked by TestExamples in the VM; no Output comment, so
	// that the unit tier, which has no device, only compiles it):
	//
	//	received "ping" (4 bytes)
	//	received "pong!" (5 bytes)
}
