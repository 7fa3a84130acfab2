// Command vm is ibgo's soft-RoCE test bed: it builds a guest from Debian
// packages (stock kernel with rdma_rxe, busybox, rdma-core's tools), boots it
// under qemu with software emulation and no host network, and runs either the
// VM-tier Go tests or a shell command inside it. The guest's verdict is the
// exit status.
//
//	go run ./hwtest/vm image [-kernel 6.1|6.12]
//	go run ./hwtest/vm test  [-kernel ...] [-topo one|two] [-run REGEX] [packages]
//	go run ./hwtest/vm run   [-kernel ...] [-topo one|two] [-node2 CMD] -- 'ibgo devinfo -v'
//
// See docs/testing.md.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ibgo/ibgo/hwtest/vm/harness"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type common struct {
	kernel  string
	topo    string
	timeout time.Duration
	mtu     int
	mem     int
	smp     int
	kargs   string
	plugin  string
	out     string
	logDir  string
	quiet   bool
	env     multi
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kernel, "kernel", envOr("IBGO_VM_KERNEL", "6.1"), "guest kernel: 6.1 (bookworm), 6.12 (bookworm-security) or a linux-image-*-amd64 package")
	fs.StringVar(&c.topo, "topo", harness.TopoOne, "topology: one (rxe0 on dummy0) or two (two guests on a qemu stream link)")
	fs.DurationVar(&c.timeout, "timeout", 20*time.Minute, "kill the guests after this long")
	fs.IntVar(&c.mtu, "mtu", 9000, "netdev MTU in the guest (9000 gives RoCE MTU 4096, 1500 gives 1024)")
	fs.IntVar(&c.mem, "mem", 1024, "guest memory in MiB")
	fs.IntVar(&c.smp, "smp", 0, "vCPUs per guest (default 2 for one guest, 1 each for two)")
	fs.StringVar(&c.kargs, "kargs", "", "extra guest kernel command-line arguments (measurements only, e.g. tsc=reliable)")
	fs.StringVar(&c.plugin, "plugin", "", "qemu TCG plugin and its arguments, lib.so,key=value (measurements only: make tbcount-vm)")
	fs.StringVar(&c.out, "out", "", "host directory shared into the guest at /out (virtio-9p)")
	fs.StringVar(&c.logDir, "logdir", "", "where console logs are kept (default: the cache dir's logs/)")
	fs.BoolVar(&c.quiet, "quiet", false, "do not stream the guest console")
	fs.Var(&c.env, "env", "KEY=VALUE exported in the guest (repeatable)")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vm: "+format+"\n", args...)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "image":
		err = cmdImage(os.Args[2:])
	case "test":
		err = cmdTest(os.Args[2:])
	case "run":
		err = cmdRun(os.Args[2:])
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "vm: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vm: FAIL: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  vm image [-kernel 6.1|6.12]                         build (or find cached) the guest image
  vm test  [flags] [-run REGEX] [packages]            run VM-tier tests (*_vm_test.go) in the guest
  vm run   [flags] [-node2 CMD] -- COMMAND            run a shell command in the guest
Run 'vm <command> -h' for flags. Docs: docs/testing.md
`)
}

func cmdImage(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	var c common
	c.register(fs)
	fs.Parse(args)
	img, err := harness.BuildImage(logf, c.kernel)
	if err != nil {
		return err
	}
	if img.Built {
		fmt.Printf("built %s in %.1fs\n", img.Dir, img.BuildTime.Seconds())
	} else {
		fmt.Printf("cached %s\n", img.Dir)
	}
	fmt.Printf("kernel    %s\nvmlinux   %s\ninitramfs %s\n", img.Kernel, img.Vmlinux, img.Initramfs)
	return nil
}

// prepare builds the image and the ibgo binary and starts the overlays.
func prepare(c *common, work string) (*harness.Image, [2]*harness.Overlay, error) {
	var ovs [2]*harness.Overlay
	t0 := time.Now()
	img, err := harness.BuildImage(logf, c.kernel)
	if err != nil {
		return nil, ovs, err
	}
	if img.Built {
		logf("image built in %.1fs", time.Since(t0).Seconds())
	}
	root, err := harness.ModuleRoot()
	if err != nil {
		return nil, ovs, err
	}
	bin, err := harness.BuildIbgo(root, work)
	if err != nil {
		return nil, ovs, err
	}
	env := []string(c.env)
	for _, k := range []string{"REQUIRE_VM", "IBGO_TEST_VERBOSE"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for i := range ovs {
		ovs[i] = harness.NewOverlay()
		ovs[i].AddFile("/ibgo/bin/ibgo", bin, 0o755)
		ovs[i].AddData("/ibgo/env", harness.EnvFile(env), 0o644)
	}
	return img, ovs, nil
}

func boot(c *common, name string, img *harness.Image, ovs [2]*harness.Overlay, work string) (*harness.Result, error) {
	var cfg harness.RunConfig
	cfg.Image = img
	cfg.Topology = c.topo
	cfg.Timeout = c.timeout
	cfg.MTU = c.mtu
	cfg.MemMiB = c.mem
	cfg.SMP = c.smp
	cfg.KernelArgs = c.kargs
	cfg.Plugin = c.plugin
	cfg.LogDir = c.logDir
	cfg.Name = name
	cfg.Logf = logf
	if c.out != "" {
		abs, err := filepath.Abs(c.out)
		if err != nil {
			return nil, err
		}
		cfg.OutDir = abs
	}
	if !c.quiet {
		cfg.Console = os.Stdout
	}
	n := 1
	if c.topo == harness.TopoTwo {
		n = 2
	}
	for i := 0; i < n; i++ {
		p := filepath.Join(work, fmt.Sprintf("overlay-%d.cpio", i+1))
		if err := ovs[i].Write(p); err != nil {
			return nil, err
		}
		cfg.Overlays[i] = p
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := harness.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	report(res)
	return res, res.Err()
}

func report(res *harness.Result) {
	for _, n := range res.Nodes {
		status := "ok"
		if !n.OK() {
			status = "FAILED"
		}
		fmt.Fprintf(os.Stderr, "vm: node %d %s: boot marker at %.1fs, rxe0 up at %.1fs, guest done at %.1fs; log %s\n",
			n.Node, status, n.Boot.Seconds(), n.RXE.Seconds(), n.Wall.Seconds(), n.Log)
		for _, m := range n.Markers {
			if strings.HasPrefix(m, "TEST-END") || strings.HasPrefix(m, "ERROR") || strings.HasPrefix(m, "WARN") {
				fmt.Fprintf(os.Stderr, "vm: node %d: %s\n", n.Node, m)
			}
		}
		for _, w := range n.Warnings {
			fmt.Fprintf(os.Stderr, "vm: node %d kernel warning: %s\n", n.Node, w)
		}
		if !n.OK() {
			fmt.Fprintf(os.Stderr, "vm: node %d console tail:\n%s\n", n.Node, indent(n.Tail()))
		}
	}
	fmt.Fprintf(os.Stderr, "vm: total wall %.1fs\n", res.Wall.Seconds())
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func cmdTest(args []string) error {
	fs := flag.NewFlagSet("test", flag.ExitOnError)
	var c common
	c.register(fs)
	run := fs.String("run", "", "only tests matching this regexp (go test -run)")
	skip := fs.String("skip", "", "leave out tests matching this regexp (go test -skip)")
	bench := fs.String("bench", "", "run benchmarks matching this regexp (and no tests unless -run is given)")
	benchtime := fs.String("benchtime", "", "go test -benchtime for -bench")
	count := fs.Int("count", 0, "go test -count")
	race := fs.Bool("race", false, "build the test binaries with the race detector (cgo on: needs gcc on an amd64 host; the binaries link the C library, which the Debian guest has)")
	testTimeout := fs.Duration("test.timeout", 15*time.Minute, "per-binary test timeout")
	fs.Parse(args)
	work, err := os.MkdirTemp("", "ibgo-vm-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	img, ovs, err := prepare(&c, work)
	if err != nil {
		return err
	}
	root, _ := harness.ModuleRoot()
	pkgs, err := harness.VMPackages(root, fs.Args())
	if err != nil {
		return err
	}
	if len(pkgs) == 0 {
		return errors.New("no package under the given patterns has VM-tier tests (*_vm_test.go)")
	}
	if err := harness.BuildTests(root, work, pkgs, *race, logf); err != nil {
		return err
	}
	targs := []string{"-test.timeout=" + testTimeout.String()}
	if *run != "" {
		targs = append(targs, "-test.run="+*run)
	}
	if *skip != "" {
		targs = append(targs, "-test.skip="+*skip)
	}
	if *bench != "" {
		if *run == "" {
			targs = append(targs, "-test.run=^$")
		}
		targs = append(targs, "-test.bench="+*bench, "-test.benchmem")
		if *benchtime != "" {
			targs = append(targs, "-test.benchtime="+*benchtime)
		}
	}
	if *count > 0 {
		targs = append(targs, fmt.Sprintf("-test.count=%d", *count))
	}
	job := harness.TestJob(pkgs, targs)
	for _, o := range ovs {
		for _, p := range pkgs {
			harness.AddPackage(o, p)
		}
		if err := harness.AddTestdata(o, root, "github.com/ibgo/ibgo"); err != nil {
			return err
		}
		o.AddData("/ibgo/job.sh", job, 0o755)
	}
	_, err = boot(&c, "test", img, ovs, work)
	return err
}

// guestLib is hwtest/vm/lib.sh, the shell helpers every guest has at
// /ibgo/lib.sh for the scripts `run -script` ships (`. /ibgo/lib.sh`).
//
//go:embed lib.sh
var guestLib string

func cmdRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var c common
	c.register(fs)
	node2 := fs.String("node2", "", "command for node 2 in the two-guest topology (default: the same command)")
	script := fs.String("script", "", "a shell script file to run instead of a command line")
	fs.Parse(args)
	var command string
	switch {
	case *script != "":
		b, err := os.ReadFile(*script)
		if err != nil {
			return err
		}
		command = string(b)
	case fs.NArg() > 0:
		command = strings.Join(fs.Args(), " ")
	default:
		return errors.New("run: give a command after --, or -script FILE")
	}
	work, err := os.MkdirTemp("", "ibgo-vm-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	img, ovs, err := prepare(&c, work)
	if err != nil {
		return err
	}
	ovs[0].AddData("/ibgo/job.sh", harness.ShellJob(command), 0o755)
	ovs[0].AddData("/ibgo/lib.sh", []byte(guestLib), 0o644)
	ovs[1].AddData("/ibgo/lib.sh", []byte(guestLib), 0o644)
	c2 := command
	if *node2 != "" {
		c2 = *node2
	}
	ovs[1].AddData("/ibgo/job.sh", harness.ShellJob(c2), 0o755)
	_, err = boot(&c, "run", img, ovs, work)
	return err
}
