package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ibgo/ibgo/uverbs"
)

// deviceForNetdev finds the RDMA device and port bound to a network
// interface (the reverse of ibdev2netdev), which is how SR-IOV VFs are
// told apart: a pod sees mlx5_0..mlx5_25 but knows its attachment as net1.
// It mirrors nothing in rdma-core (ibdev2netdev is a script over the same
// sysfs/netlink facts uverbs.Devices reads).
func deviceForNetdev(netdev string) (*uverbs.Device, uverbs.PortInfo, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, uverbs.PortInfo{}, noDevices(err)
	}
	return pickNetdev(devs, netdev)
}

func pickNetdev(devs []*uverbs.Device, netdev string) (*uverbs.Device, uverbs.PortInfo, error) {
	type hit struct {
		d *uverbs.Device
		p uverbs.PortInfo
	}
	var hits []hit
	known := map[string]bool{}
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.Netdev == "" {
				continue
			}
			known[p.Netdev] = true
			if p.Netdev == netdev {
				hits = append(hits, hit{d, p})
			}
		}
	}
	switch len(hits) {
	case 1:
		return hits[0].d, hits[0].p, nil
	case 0:
		var names []string
		for n := range known {
			names = append(names, n)
		}
		sort.Strings(names)
		have := "no RDMA port has a network interface"
		if len(names) > 0 {
			have = "interfaces with an RDMA device: " + strings.Join(names, ", ")
		}
		return nil, uverbs.PortInfo{}, fail(1, "no RDMA device is bound to network interface %q (%s); `ibgo devices` shows the mapping", netdev, have)
	}
	var which []string
	for _, h := range hits {
		which = append(which, fmt.Sprintf("%s port %d", h.d.Name, h.p.Port))
	}
	return nil, uverbs.PortInfo{}, fail(1, "network interface %q is bound to several RDMA ports (%s): choose one with -d/--ib-dev", netdev, strings.Join(which, ", "))
}
