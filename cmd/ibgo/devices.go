package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	_ "github.com/ibgo/ibgo/mlx5" // providers
	_ "github.com/ibgo/ibgo/rxe"
	"github.com/ibgo/ibgo/uverbs"
)

func init() {
	register(&cli.Command{
		Name:  "devices",
		Usage: "list RDMA devices with their node GUID, driver, uverbs device and netdev per port (ibv_devices + ibdev2netdev)",
		Description: "With -d or --netdev, only the device (and port) named, or bound to that network interface:\n" +
			"   ibgo devices --netdev net1 -q     prints \"mlx5_3 1\", the device and port behind net1\n\n" +
			"Reads /sys/class/infiniband and the network interfaces the ports are bound to.\n\n" +
			"Examples:\n" +
			"   ibgo devices\n" +
			"      device  node GUID            driver  uverbs   port  link layer  state   netdev\n" +
			"      rxe0    5054:00ff:fe12:3456  rxe     uverbs0  1     Ethernet    ACTIVE  eth0 (Up)\n" +
			"   ibgo devices -d mlx5_0\n\n" +
			"Environment: none.",
		Flags: devicesFilterFlags, // devices_filter.go
		Action: func(c *cli.Context) error {
			if filtered, err := devicesFiltered(c); filtered || err != nil {
				return err
			}
			return listDevices(c.App.Writer)
		},
	})
}

// noDevices turns "no device" into the exit-1 message users need.
func noDevices(err error) error {
	if errors.Is(err, uverbs.ErrNoDevice) {
		return fail(1, "no RDMA devices found: %v.\nCheck that the kernel modules are loaded: the device driver (mlx5_ib for ConnectX; "+
			"rdma_rxe for soft-RoCE, then `rdma link add rxe0 type rxe netdev <ifname>`) and ib_uverbs (for /dev/infiniband/uverbs*). "+
			"`rdma link show` lists the devices the kernel has", err)
	}
	return fail(1, "%v", err)
}

func listDevices(w io.Writer) error {
	devs, err := uverbs.Devices()
	if err != nil {
		return noDevices(err)
	}
	return printDevices(w, devs)
}

func printDevices(w io.Writer, devs []*uverbs.Device) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tnode GUID\tdriver\tuverbs\tport\tlink layer\tstate\tnetdev")
	for _, d := range devs {
		uv := d.Uverbs
		if uv == "" {
			uv = "-"
		}
		if len(d.Ports) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t-\n", d.Name, d.NodeGUID.Hex(), d.Driver, uv)
		}
		for _, p := range d.Ports {
			nd := "-"
			if p.Netdev != "" {
				nd = p.Netdev
				if p.NetdevState != "" {
					nd += " (" + upFirst(p.NetdevState) + ")"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Name, d.NodeGUID.Hex(), d.Driver, uv,
				p.Port, p.LinkLayer, p.State, nd)
		}
	}
	return tw.Flush()
}

func upFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
