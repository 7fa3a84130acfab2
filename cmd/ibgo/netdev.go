package main

import (
	"errors"
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
	d, p, err := uverbs.PickNetdev(devs, netdev)
	switch {
	case err == nil:
		return d, p, nil
	case errors.Is(err, uverbs.ErrNoDevice):
		return nil, p, fail(1, "%s; `ibgo devices` shows the mapping", strings.TrimPrefix(err.Error(), uverbs.ErrNoDevice.Error()+": "))
	}
	return nil, p, fail(1, "%s", strings.Replace(err.Error(), "choose one by device name", "choose one with -d/--ib-dev", 1))
}
