package cm_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/ibgo/ibgo/cm"
	"github.com/ibgo/ibgo/uverbs"
)

// A UD client: resolve the server's QP by SIDR, then send it datagrams.
func ExampleDialUD() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ep, peer, err := cm.DialUD(ctx, "10.0.0.1:7174", &cm.UDOptions{PrivateData: []byte("hello")})
	if err != nil {
		fmt.Println(err) // *cm.Error: ErrUnreachable (no listener: Status 1), ErrRefused (+ PrivateData), ErrTimeout
		return
	}
	defer ep.Close()
	defer peer.Close()
	wr := uverbs.SendWR{Opcode: uverbs.WRSendWithImm, Imm: ep.QP().QPN() /* udaddy's convention */}
	peer.Dest(&wr) // AH, remote QPN, Q_Key
	// register a buffer with ep.PD(), set wr.SGL, ep.QP().PostSend, poll ep.SendCQ()
}

// A UD server: answer every SIDR request with the listener's QP.
func ExampleListenUD() {
	ctx := context.Background()
	l, err := cm.ListenUD(ctx, "10.0.0.1:7174", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	// post receives on l.Endpoint().QP() first: clients send at once
	for {
		req, err := l.Accept(ctx)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(req.PrivateData, []byte("hello")) {
			req.Reject([]byte("who are you?"))
			continue
		}
		req.Accept(nil)
	}
}

// Multicast: join a group as a full member (the QP is attached) and send to
// it; Leave (or Close) detaches and leaves.
func ExampleUDEndpoint_JoinMulticast() {
	ctx := context.Background()
	ep, err := cm.OpenUD(ctx, "10.0.0.1", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	m, err := ep.JoinMulticast(ctx, "239.1.1.1", nil) // &cm.JoinOptions{SendOnly: true} to only send
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Leave()
	var wr uverbs.SendWR
	m.Peer.Dest(&wr) // the group's AH, QPN 0xFFFFFF, Q_Key 0x01234567
}
