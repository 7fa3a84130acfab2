package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ibgo/ibgo/uverbs"
)

// devicesFilterFlags let `ibgo devices` answer "which device is net1?".
var devicesFilterFlags = []cli.Flag{
	&cli.StringFlag{Name: "ib-dev", Aliases: []string{"d"}, Usage: "only this RDMA device, or the one bound to this network interface"},
	&cli.StringFlag{Name: "netdev", Usage: "only the RDMA device and port bound to this network interface (e.g. an SR-IOV VF's net1)"},
	&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "with -d/--netdev, print only \"<device> <port>\" for scripts"},
}

// devicesFiltered handles -d/--netdev; filtered is false when neither is
// given. -d takes a device name first, then a netdev name, as users hold
// either.
func devicesFiltered(c *cli.Context) (filtered bool, err error) {
	name, netdev := c.String("ib-dev"), c.String("netdev")
	if name == "" && netdev == "" {
		return false, nil
	}
	if name != "" && netdev != "" {
		return true, fail(1, "give -d/--ib-dev or --netdev, not both")
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return true, noDevices(err)
	}
	var dev *uverbs.Device
	var ports []uverbs.PortInfo
	if name != "" {
		for _, d := range devs {
			if d.Name == name {
				dev, ports = d, d.Ports
			}
		}
		if dev == nil {
			netdev = name // not a device name: try it as an interface
		}
	}
	if dev == nil {
		d, p, err := pickNetdev(devs, netdev)
		if err != nil {
			return true, err
		}
		dev, ports = d, []uverbs.PortInfo{p}
	}
	if c.Bool("quiet") {
		for _, p := range ports {
			fmt.Fprintf(c.App.Writer, "%s %d\n", dev.Name, p.Port)
		}
		return true, nil
	}
	one := *dev
	one.Ports = ports
	return true, printDevices(c.App.Writer, []*uverbs.Device{&one})
}
