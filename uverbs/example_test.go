package uverbs_test

import (
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// Open the first RDMA device, query it, connect two RC queue pairs on it
// back to back, send a message from one to the other and poll both
// completions: the verbs without rdma_cm. A provider must be linked in for
// its devices (import _ "github.com/ibgo/ibgo/rxe" for soft-RoCE,
// ".../mlx5" for ConnectX). It needs an RDMA device; TestExamples runs it
// in the VM tier.
func Example() {
	devs, err := uverbs.Devices()
	if err != nil || len(devs) == 0 {
		log.Fatal("no RDMA device: ", err)
	}
	ctx, err := uverbs.Open(devs[0].Name)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	attr, err := ctx.QueryDevice()
	if err != nil {
		log.Fatal(err)
	}
	port, err := ctx.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("port 1:", port.State, "max QPs > 0:", attr.MaxQP > 0)

	// RoCE addresses the QPs by GID: the one of the netdev's IP
	var gid uverbs.GID
	copy(gid[:], net.ParseIP(exampleIP()).To16())
	gidx, err := ctx.GIDIndexForIP(1, gid)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	mem, err := uverbs.AllocMemory(4096, uverbs.MemoryOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer mem.Close()
	mr, err := pd.RegMR(mem.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	cq, err := ctx.CreateCQ(uverbs.CQInitAttr{CQE: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Close()
	newQP := func() *uverbs.QP {
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		return qp
	}
	a, z := newQP(), newQP()
	defer a.Close()
	defer z.Close()
	p := uverbs.ConnectParams{SGIDIndex: gidx, MTU: port.ActiveMTU}
	if err := a.Connect(uverbs.Endpoint{QPN: z.QPN(), PSN: 2, GID: gid}, 1, p); err != nil {
		log.Fatal(err)
	}
	if err := z.Connect(uverbs.Endpoint{QPN: a.QPN(), PSN: 1, GID: gid}, 2, p); err != nil {
		log.Fatal(err)
	}

	// z receives into bytes 0..63, a sends "hello, verbs" from 1024
	if _, err := z.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{mr.SGE(0, 64)}}}); err != nil {
		log.Fatal(err)
	}
	n := copy(mem.Bytes()[1024:], "hello, verbs")
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{mr.SGE(1024, n)}}}); err != nil {
		log.Fatal(err)
	}
	wc := make([]uverbs.WC, 2)
	deadline := time.Now().Add(10 * time.Second)
	for got := 0; got < 2; {
		k, err := cq.Poll(wc[got:])
		if err != nil {
			log.Fatal(err)
		}
		got += k
		if time.Now().After(deadline) {
			log.Fatal("no completion")
		}
	}
	for _, w := range wc {
		if w.Status != uverbs.WCSuccess {
			log.Fatal(w.Status)
		}
		if w.WRID == 1 {
			fmt.Printf("received %q\n", mem.Bytes()[:w.ByteLen])
		}
	}
	// It prints (checked by TestExamples in the VM):
	//
	//	port 1: PORT_ACTIVE max QPs > 0: true
	//	received "hello, verbs"
}

// exampleIP is the device's netdev address: the VM harness's guest
// exports it as IBGO_VM_IP.
func exampleIP() string {
	if ip := os.Getenv("IBGO_VM_IP"); ip != "" {
		return ip
	}
	return "10.0.0.1"
}
