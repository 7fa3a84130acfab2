package driver

import (
	"net/netip"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Host names in a command's channel are resolved off the conductor, as
// the C driver resolves a channel on its async executor
// (aeron_udp_channel_finish_parse, aeron_driver_async_resolve_execute): a
// command whose endpoint= or control= names a host the conductor has not
// looked up for it is set aside while the names are looked up on
// goroutines (backgroundOpens.resolve), then run on the conductor with
// those results (names). So a slow or dead DNS server holds up that
// command alone, never the conductor's duty cycle.

// channelNames lists the host names (not IP literals) in the endpoint
// and control of a network channel.
func channelNames(u *uri.ChannelURI) []string {
	if u.Media == uri.MediaIPC {
		return nil
	}
	var hosts []string
	for _, k := range []string{uri.KeyEndpoint, uri.KeyControl} {
		v, ok := u.Get(k)
		if !ok {
			continue
		}
		a, err := uri.ParseAddress(v)
		if err != nil || a.IP.IsValid() || a.Host == "" {
			continue
		}
		if len(hosts) == 0 || hosts[0] != a.Host {
			hosts = append(hosts, a.Host)
		}
	}
	return hosts
}

// commandChannel is the channel of a command that may name hosts: the
// adds of publications and subscriptions, the adds and removes of
// destinations.
func commandChannel(typeID int32, msg []byte) (string, bool) {
	switch typeID {
	case cnc.CmdAddPublication, cnc.CmdAddExclusivePublication:
		cmd, err := cnc.DecodePublicationCommand(typeID, msg)
		return cmd.Channel, err == nil
	case cnc.CmdAddSubscription:
		cmd, err := cnc.DecodeSubscriptionCommand(typeID, msg)
		return cmd.Channel, err == nil
	case cnc.CmdAddDestination, cnc.CmdAddRcvDestination, cnc.CmdRemoveDestination, cnc.CmdRemoveRcvDestination:
		cmd, err := cnc.DecodeDestinationCommand(typeID, msg)
		return cmd.Channel, err == nil
	}
	return "", false
}

// deferForNames sets the command aside when its channel names hosts, looks
// them up on goroutines and runs it with the results once all are in
// (run, on the conductor). It says whether it did.
func (c *conductor) deferForNames(typeID int32, msg []byte, run func()) bool {
	channel, ok := commandChannel(typeID, msg)
	if !ok {
		return false
	}
	u, err := uri.Parse(channel)
	if err != nil {
		return false // the command's own parse reports it
	}
	hosts := channelNames(u)
	if len(hosts) == 0 {
		return false
	}
	found := map[string]netip.Addr{}
	failed := map[string]error{}
	pending := len(hosts)
	for _, h := range hosts {
		c.opens.resolve(h, func(a netip.Addr, err error) {
			if err != nil {
				failed[h] = err
			} else {
				found[h] = a
			}
			if pending--; pending > 0 {
				return
			}
			c.names, c.nameErrs = found, failed
			defer func() { c.names, c.nameErrs = nil, nil }()
			run()
		})
	}
	return true
}
