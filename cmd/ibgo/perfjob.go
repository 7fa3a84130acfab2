package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// defaultJobConnectTimeout is how long a client pod keeps retrying its
// server: pods of one Job start minutes apart when images are pulled.
const defaultJobConnectTimeout = 600

func init() {
	register(&cli.Command{
		Name:      "perfjob",
		Usage:     "run one side of a perftest pair in a Kubernetes Indexed Job: index 0 serves, the others connect to it",
		ArgsUsage: "<test> [perftest options]",
		Description: "Reads the pod's completion index ($JOB_COMPLETION_INDEX, or --index). Index 0 runs\n" +
			"`ibgo perf <test> [options]` as the server; any other index runs it as a client of --peer\n" +
			"(the server pod's DNS name behind the Job's headless Service). The client keeps retrying the\n" +
			"name and the connection for --connect_timeout seconds (default " + strconv.Itoa(defaultJobConnectTimeout) + " here), so no sleep or\n" +
			"DNS loop is needed while the server pod starts. --netdev picks the RDMA device bound to a\n" +
			"network interface (an SR-IOV attachment such as net1) and passes it as -d.\n" +
			"Options after the test are perftest's; `ibgo perf write_bw -h` lists them.\n\n" +
			"Example (deploy/perftest/job.yaml):\n" +
			"   ibgo perfjob --netdev net1 --peer ib-perftest-0.ib-perftest -- write_bw -D 10 --report_gbits\n\n" +
			"Environment:\n" +
			"   JOB_COMPLETION_INDEX   this pod's index in an Indexed Job (set by Kubernetes)\n" +
			"   IBGO_PEER              the server's host name when --peer is not given\n" +
			"   IBGO_NETDEV            the network interface when --netdev is not given",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "index", Value: -1, Usage: "completion index (default: $JOB_COMPLETION_INDEX)"},
			&cli.StringFlag{Name: "peer", EnvVars: []string{"IBGO_PEER"}, Usage: "server host name for index > 0"},
			&cli.StringFlag{Name: "netdev", EnvVars: []string{"IBGO_NETDEV"}, Usage: "use the RDMA device bound to this network interface"},
		},
		Action: perfJob,
	})
}

func perfJob(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) == 0 {
		return fail(1, "perfjob: name the test, e.g. `ibgo perfjob -- write_bw -D 10`")
	}
	index := c.Int("index")
	if index < 0 {
		s := os.Getenv("JOB_COMPLETION_INDEX")
		if s == "" {
			return fail(1, "perfjob: no --index and no JOB_COMPLETION_INDEX: run it in an Indexed Job (completionMode: Indexed) or pass --index")
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fail(1, "perfjob: JOB_COMPLETION_INDEX=%q is not a completion index", s)
		}
		index = n
	}
	perfArgs := []string{"ibgo", "perf", args[0]}
	if nd := c.String("netdev"); nd != "" {
		if hasOption(args[1:], "-d", "--ib-dev") {
			return fail(1, "perfjob: give either --netdev %s or -d/--ib-dev, not both", nd)
		}
		dev, port, err := deviceForNetdev(nd)
		if err != nil {
			return err
		}
		perfArgs = append(perfArgs, "-d", dev.Name)
		if !hasOption(args[1:], "-i", "--ib-port") {
			perfArgs = append(perfArgs, "-i", strconv.Itoa(int(port.Port)))
		}
	}
	perfArgs = append(perfArgs, args[1:]...)
	if index > 0 {
		peer := c.String("peer")
		if peer == "" {
			return fail(1, "perfjob: index %d is a client and needs the server's name: --peer or IBGO_PEER (e.g. <job>-0.<service>)", index)
		}
		if !hasOption(args[1:], "--connect_timeout") {
			perfArgs = append(perfArgs, "--connect_timeout="+strconv.Itoa(defaultJobConnectTimeout))
		}
		perfArgs = append(perfArgs, peer)
	}
	fmt.Fprintf(c.App.ErrWriter, "perfjob: index %d runs: %s\n", index, strings.Join(perfArgs[1:], " "))
	if code := run(perfArgs, c.App.Writer, c.App.ErrWriter); code != 0 {
		return fail(code, "")
	}
	return nil
}

// hasOption reports whether args set one of the named options, either as
// "-d X", "-dX", "--ib-dev X" or "--ib-dev=X".
func hasOption(args []string, names ...string) bool {
	for _, a := range args {
		for _, n := range names {
			if a == n || strings.HasPrefix(a, n+"=") || (len(n) == 2 && strings.HasPrefix(a, n) && !strings.HasPrefix(a, "--")) {
				return true
			}
		}
	}
	return false
}
