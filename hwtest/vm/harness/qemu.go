package harness

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Topology names.
const (
	TopoOne = "one" // one guest: rxe0 on dummy0 (10.0.0.1), loopback QPs
	TopoTwo = "two" // two guests on a qemu stream link: rxe0 on eth0 (10.3.0.1, 10.3.0.2)
)

// RunConfig describes one boot of the test bed.
type RunConfig struct {
	Image    *Image
	Topology string
	// Overlays[i] is the per-run initramfs overlay of node i+1 (built with
	// Overlay); the one-guest topology uses Overlays[0] only.
	Overlays [2]string
	Timeout  time.Duration
	MTU      int // netdev MTU (9000 gives RoCE MTU 4096)
	MemMiB   int // per guest
	SMP      int // per guest; 0: 2 for one guest, 1 each for two
	// KernelArgs are appended to the guest kernel's command line (for
	// measurements, e.g. tsc=reliable; the test tiers leave it empty).
	KernelArgs string
	// Plugin is a qemu TCG plugin with its arguments ("lib.so,key=value"),
	// for measurements in one guest (make tbcount-vm); the test tiers leave
	// it empty.
	Plugin  string
	OutDir  string // shared into the guest at /out over virtio-9p (optional)
	LogDir  string
	Name    string    // log file prefix
	Console io.Writer // live console (nil: none)
	Logf    Logf
}

// NodeResult is the verdict of one guest.
type NodeResult struct {
	Node     int
	RC       int // the job's exit status; -1 if none was reported
	Log      string
	Panic    bool
	TimedOut bool
	Boot     time.Duration // qemu start to the guest's BOOT marker
	RXE      time.Duration // qemu start to rxe0 being up
	Wall     time.Duration
	Warnings []string // kernel WARNING/BUG lines seen on the console
	Markers  []string // the guest's @@ marker lines, without the nonce
	tail     []string
}

// OK reports whether the guest ran its job to a zero exit status.
func (n *NodeResult) OK() bool { return n.RC == 0 && !n.Panic && !n.TimedOut }

// Tail returns the last console lines.
func (n *NodeResult) Tail() string { return strings.Join(n.tail, "\n") }

// Result is the verdict of a run.
type Result struct {
	Nodes []*NodeResult
	Wall  time.Duration
}

// OK reports whether every guest succeeded.
func (r *Result) OK() bool {
	for _, n := range r.Nodes {
		if !n.OK() {
			return false
		}
	}
	return len(r.Nodes) > 0
}

// Err describes the failure, or returns nil.
func (r *Result) Err() error {
	var msgs []string
	for _, n := range r.Nodes {
		switch {
		case n.Panic:
			msgs = append(msgs, fmt.Sprintf("node %d: guest kernel panic or oops (log %s)", n.Node, n.Log))
		case n.TimedOut:
			msgs = append(msgs, fmt.Sprintf("node %d: timed out (log %s)", n.Node, n.Log))
		case n.RC == -1:
			msgs = append(msgs, fmt.Sprintf("node %d: the guest stopped without reporting a result (log %s)", n.Node, n.Log))
		case n.RC != 0:
			msgs = append(msgs, fmt.Sprintf("node %d: job failed with exit status %d (log %s)", n.Node, n.RC, n.Log))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// A panic ends the guest (panic=-1, oops=panic); warnings are counted and
// reported but do not fail the run by themselves.
var (
	panicRE = regexp.MustCompile(`Kernel panic - not syncing`)
	warnRE  = regexp.MustCompile(`WARNING: CPU:|BUG: |general protection fault|Oops:`)
)

// Run boots the guests, streams their consoles, and returns their verdicts.
func Run(ctx context.Context, cfg RunConfig) (*Result, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Topology == "" {
		cfg.Topology = TopoOne
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Minute
	}
	if cfg.MTU == 0 {
		cfg.MTU = 9000
	}
	if cfg.MemMiB == 0 {
		cfg.MemMiB = 1024
	}
	if cfg.Name == "" {
		cfg.Name = "run"
	}
	if cfg.LogDir == "" {
		c, err := CacheDir()
		if err != nil {
			return nil, err
		}
		cfg.LogDir = filepath.Join(c, "logs")
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, err
	}
	nodes := 1
	smp := cfg.SMP
	switch cfg.Topology {
	case TopoOne:
		if smp == 0 {
			smp = 2
		}
	case TopoTwo:
		nodes = 2
		if smp == 0 {
			smp = 1
		}
	default:
		return nil, fmt.Errorf("unknown topology %q (one or two)", cfg.Topology)
	}
	if cfg.Plugin != "" && nodes != 1 {
		return nil, fmt.Errorf("a qemu plugin is for the one-guest topology only")
	}
	runDir, err := os.MkdirTemp("", "ibgo-vm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(runDir)
	var nb [8]byte
	rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	stamp := time.Now().Format("20060102-150405")
	sock := filepath.Join(runDir, "link.sock")

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &Result{}
	start := time.Now()
	var wg sync.WaitGroup
	var consoleMu sync.Mutex
	for i := 0; i < nodes; i++ {
		node := i + 1
		initrd := filepath.Join(runDir, fmt.Sprintf("initrd-%d.cpio", node))
		if err := concatFiles(initrd, cfg.Image.Initramfs, cfg.Overlays[i]); err != nil {
			return nil, err
		}
		nr := &NodeResult{Node: node, RC: -1,
			Log: filepath.Join(cfg.LogDir, fmt.Sprintf("%s-%s-%s-node%d.log", stamp, cfg.Name, cfg.Image.Kernel, node))}
		res.Nodes = append(res.Nodes, nr)
		args := []string{
			// Named threads ("CPU 0/TCG", ...) can be found and pinned on
			// the host when measuring (docs/perf.md).
			"-name", fmt.Sprintf("ibgo-node%d,debug-threads=on", node),
			"-M", "pc", "-accel", "tcg", "-cpu", "max", "-smp", strconv.Itoa(smp), "-m", strconv.Itoa(cfg.MemMiB),
			"-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot", "-nic", "none",
			"-kernel", cfg.Image.Vmlinux, "-initrd", initrd,
			"-append", fmt.Sprintf("console=ttyS0 panic=-1 oops=panic loglevel=4 edd=off ibgo.nonce=%s ibgo.topo=%s ibgo.node=%d ibgo.mtu=%d%s",
				nonce, cfg.Topology, node, cfg.MTU, outArg(cfg.OutDir)+kernelArgs(cfg.KernelArgs)),
		}
		if cfg.Plugin != "" {
			args = append(args, "-plugin", cfg.Plugin)
		}
		if nodes == 2 {
			server := "off"
			if node == 1 {
				server = "on"
			}
			args = append(args,
				"-netdev", fmt.Sprintf("stream,id=n0,server=%s,addr.type=unix,addr.path=%s", server, sock),
				"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=52:54:00:12:34:%02x", node))
		}
		if cfg.OutDir != "" {
			d := cfg.OutDir
			if nodes == 2 {
				d = filepath.Join(cfg.OutDir, fmt.Sprintf("node%d", node))
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
			args = append(args, "-virtfs", fmt.Sprintf("local,path=%s,mount_tag=out,security_model=none,id=out", d))
		}
		if node == 2 {
			// The stream server must listen before the client connects.
			for t := 0; t < 100; t++ {
				if _, err := os.Stat(sock); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
		cmd.Stdin = nil
		pr, pw := io.Pipe()
		cmd.Stdout = pw
		cmd.Stderr = pw
		cmd.WaitDelay = 5 * time.Second
		logf, err := os.Create(nr.Log)
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("starting qemu-system-x86_64: %w", err)
		}
		cfg.Logf("node %d: qemu started (kernel %s, %d vCPU, %d MiB, topology %s); console log %s",
			node, cfg.Image.Kernel, smp, cfg.MemMiB, cfg.Topology, nr.Log)
		wg.Add(2)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			if ctx.Err() == context.DeadlineExceeded {
				nr.TimedOut = true
			}
			pw.CloseWithError(err)
		}()
		go func() {
			defer wg.Done()
			defer logf.Close()
			prefix := ""
			if nodes == 2 {
				prefix = fmt.Sprintf("[node%d] ", node)
			}
			marker := "@@IBGO-" + nonce + " "
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := strings.TrimRight(sc.Text(), "\r")
				el := time.Since(start)
				fmt.Fprintf(logf, "%8.3f %s\n", el.Seconds(), line)
				if rest, ok := strings.CutPrefix(line, marker); ok {
					switch {
					case strings.HasPrefix(rest, "BOOT"):
						nr.Boot = el
					case strings.HasPrefix(rest, "RXE"):
						nr.RXE = el
					case strings.HasPrefix(rest, "RESULT rc="):
						f := strings.Fields(strings.TrimPrefix(rest, "RESULT rc="))
						if len(f) > 0 {
							if v, err := strconv.Atoi(f[0]); err == nil {
								nr.RC = v
							}
						}
					}
					nr.Markers = append(nr.Markers, rest)
					line = "@@ " + rest
				}
				if panicRE.MatchString(line) {
					nr.Panic = true
				}
				if warnRE.MatchString(line) {
					nr.Warnings = append(nr.Warnings, line)
				}
				nr.tail = append(nr.tail, line)
				if len(nr.tail) > 60 {
					nr.tail = nr.tail[1:]
				}
				if cfg.Console != nil {
					consoleMu.Lock()
					fmt.Fprintf(cfg.Console, "%s%s\n", prefix, line)
					consoleMu.Unlock()
				}
			}
			io.Copy(io.Discard, pr)
			nr.Wall = time.Since(start)
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	return res, nil
}

func outArg(dir string) string {
	if dir == "" {
		return ""
	}
	return " ibgo.out=1"
}

func concatFiles(dst string, srcs ...string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		if s == "" {
			continue
		}
		in, err := os.Open(s)
		if err != nil {
			out.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

// kernelArgs is extra, space-separated, for the end of the command line.
func kernelArgs(extra string) string {
	if extra = strings.TrimSpace(extra); extra != "" {
		return " " + extra
	}
	return ""
}
