package harness

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

//go:embed guest/init
var guestInit []byte

// recipeVersion changes whenever the image layout changes in a way the
// package versions do not capture.
const recipeVersion = "ibgo-vm-image-1"

// Kernels the harness knows by short name, mapped to Debian meta packages.
var kernelMeta = map[string]string{
	"6.1":  "linux-image-amd64", // bookworm's default kernel
	"6.12": "linux-image-6.12-amd64",
}

// userPackages is the guest userspace: busybox, rdma-core's tools and
// libraries with the rxe provider, perftest, iproute2 (ip, and tc for netem
// loss/reordering on the two-guest link), and their library closure (checked at build time: a library outside these packages fails the
// build, naming the library).
var userPackages = []string{
	"busybox-static",
	"libibverbs1", "ibverbs-providers", "ibverbs-utils",
	"librdmacm1", "rdmacm-utils", "libibumad3", "perftest",
	"iproute2",
	"libc6", "libgcc-s1", "libnl-3-200", "libnl-route-3-200", "libpci3", "libudev1",
	"zlib1g", "libbpf1", "libelf1", "libmnl0", "libbsd0", "libmd0", "libcap2",
	"libxtables12", // tc
}

// guestBinaries are copied with their shared-library closure.
var guestBinaries = []string{
	"usr/bin/ibv_devinfo", "usr/bin/ibv_devices", "usr/bin/ibv_asyncwatch",
	"usr/bin/ibv_rc_pingpong", "usr/bin/ibv_uc_pingpong", "usr/bin/ibv_ud_pingpong", "usr/bin/ibv_srq_pingpong",
	"usr/bin/ibv_xsrq_pingpong",
	"usr/bin/ib_write_bw", "usr/bin/ib_write_lat", "usr/bin/ib_read_bw", "usr/bin/ib_read_lat",
	"usr/bin/ib_send_bw", "usr/bin/ib_send_lat", "usr/bin/ib_atomic_bw", "usr/bin/ib_atomic_lat",
	"usr/bin/rping", "usr/bin/ucmatose", "usr/bin/udaddy", "usr/bin/mckey", "usr/bin/rdma_server",
	"usr/bin/rdma_client", "usr/bin/cmtime", "usr/bin/udpong", "usr/bin/rstream",
	"usr/bin/rdma", "sbin/ip", "sbin/tc",
}

// dlopened libraries (not in DT_NEEDED) that must be present.
var guestDlopened = []string{
	"usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", // rxe provider
	"lib/x86_64-linux-gnu/libgcc_s.so.1",                    // glibc's pthread_exit/cancel
}

// guestModules are loaded at boot, with their dependencies first. Modules the
// kernel has built in are skipped.
var guestModules = []struct{ name, args string }{
	{"crc32_generic", ""}, {"crc32_pclmul", ""}, // rxe's ICRC asks the crypto API for crc32
	{"rdma_rxe", ""}, {"ib_uverbs", ""}, {"rdma_ucm", ""}, {"ib_umad", ""},
	{"dummy", "numdummies=0"}, {"veth", ""},
	{"sch_netem", ""},                      // tc qdisc ... netem: loss, delay, reordering, duplication
	{"virtio_pci", ""}, {"virtio_net", ""}, // the two-guest link
	{"9pnet_virtio", ""}, {"9p", ""}, // the optional output share
}

// Image is a bootable guest: an uncompressed vmlinux (booted through its PVH
// entry) and an uncompressed initramfs.
type Image struct {
	Kernel    string // e.g. 6.1.0-57-amd64
	Dir       string
	Vmlinux   string
	Initramfs string
	Packages  []string
	Built     bool          // built now rather than taken from the cache
	BuildTime time.Duration // when Built
}

type manifest struct {
	Recipe   string
	Kernel   string
	Packages []string
	Modules  []string
	Built    time.Time
	Seconds  float64
}

// CacheDir is where images, downloaded packages and logs live:
// $IBGO_VM_CACHE, else the user's cache dir + /ibgo/vm.
func CacheDir() (string, error) {
	if d := os.Getenv("IBGO_VM_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set IBGO_VM_CACHE): %w", err)
	}
	return filepath.Join(d, "ibgo", "vm"), nil
}

// BuildImage returns the cached image for kernel (a short name such as "6.1"
// or "6.12", or a linux-image package name), building it when its inputs
// (package versions, this recipe) changed.
func BuildImage(logf Logf, kernel string) (*Image, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := EnsureHostTools(logf); err != nil {
		return nil, err
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	meta := kernel
	if m, ok := kernelMeta[kernel]; ok {
		meta = m
	} else if !strings.HasPrefix(kernel, "linux-image-") {
		return nil, fmt.Errorf("unknown kernel %q: use 6.1, 6.12 or a linux-image-*-amd64 package name", kernel)
	}
	kpkg, err := resolveKernel(logf, meta)
	if err != nil {
		return nil, err
	}
	kver := strings.TrimPrefix(kpkg, "linux-image-")
	pkgs, err := resolve(logf, append([]string{kpkg}, userPackages...))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintln(h, recipeVersion)
	for _, p := range pkgs {
		fmt.Fprintln(h, p.String(), p.Arch)
	}
	for _, l := range [][]string{guestBinaries, guestDlopened} {
		fmt.Fprintln(h, strings.Join(l, " "))
	}
	for _, m := range guestModules {
		fmt.Fprintln(h, m.name, m.args)
	}
	h.Write(guestInit)
	key := hex.EncodeToString(h.Sum(nil))[:16]
	img := &Image{
		Kernel:    kver,
		Dir:       filepath.Join(cache, "images", kver+"-"+key),
		Packages:  nil,
		Vmlinux:   "",
		Initramfs: "",
	}
	for _, p := range pkgs {
		img.Packages = append(img.Packages, p.String())
	}
	img.Vmlinux = filepath.Join(img.Dir, "vmlinux")
	img.Initramfs = filepath.Join(img.Dir, "initramfs.cpio")
	if _, err := os.Stat(filepath.Join(img.Dir, "manifest.json")); err == nil {
		return img, nil
	}
	start := time.Now()
	logf("building guest image for kernel %s (cache %s)", kver, img.Dir)
	debs := filepath.Join(cache, "debs")
	if err := download(logf, debs, pkgs); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	kroot := filepath.Join(work, "kroot")
	for _, p := range pkgs {
		dst := root
		if p.Name == kpkg {
			dst = kroot
		}
		if err := extract(filepath.Join(debs, p.file()), dst); err != nil {
			return nil, err
		}
	}
	stage := filepath.Join(work, "stage")
	mods, err := stageImage(stage, root, kroot, kver)
	if err != nil {
		return nil, fmt.Errorf("staging the guest: %w", err)
	}
	tmpDir := img.Dir + ".tmp"
	os.RemoveAll(tmpDir)
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return nil, err
	}
	if err := writeCpio(filepath.Join(tmpDir, "initramfs.cpio"), stage); err != nil {
		return nil, err
	}
	if err := extractVmlinux(filepath.Join(kroot, "boot", "vmlinuz-"+kver), filepath.Join(tmpDir, "vmlinux")); err != nil {
		return nil, err
	}
	m := manifest{Recipe: recipeVersion, Kernel: kver, Packages: img.Packages, Modules: mods, Built: time.Now().UTC(),
		Seconds: time.Since(start).Seconds()}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmpDir, "manifest.json"), b, 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(img.Dir)
	if err := os.Rename(tmpDir, img.Dir); err != nil {
		return nil, err
	}
	img.Built = true
	img.BuildTime = time.Since(start)
	logf("guest image for %s built in %.1fs", kver, img.BuildTime.Seconds())
	return img, nil
}

func writeCpio(path, stage string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := newCpioWriter(f)
	w.Tree(stage)
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stageImage lays out the guest's root file system in stage and returns the
// module load order.
func stageImage(stage, root, kroot, kver string) ([]string, error) {
	for _, d := range []string{"bin", "sbin", "etc/ibgo", "etc/libibverbs.d", "proc", "sys", "dev", "tmp", "run", "mnt", "root",
		"usr/bin", "usr/sbin", "lib/x86_64-linux-gnu", "lib64", "usr/lib/x86_64-linux-gnu/libibverbs", "var", "ibgo"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink("../run", filepath.Join(stage, "var/run")); err != nil {
		return nil, err
	}
	if err := copyFile(filepath.Join(stage, "init"), guestInitReader(), 0o755); err != nil {
		return nil, err
	}

	// Programs and their libraries.
	libs := newLibResolver(root, stage)
	for _, b := range append(append([]string{}, guestBinaries...), guestDlopened...) {
		src := filepath.Join(root, b)
		if err := copyPath(filepath.Join(stage, b), src, 0o755); err != nil {
			return nil, fmt.Errorf("%s (from the Debian packages): %w", b, err)
		}
		if err := libs.closure(src); err != nil {
			return nil, err
		}
	}
	ldso := "lib64/ld-linux-x86-64.so.2"
	if err := copyPath(filepath.Join(stage, ldso), resolveIn(root, ldso), 0o755); err != nil {
		return nil, fmt.Errorf("dynamic loader: %w", err)
	}
	if err := copyPath(filepath.Join(stage, "etc/libibverbs.d/rxe.driver"), filepath.Join(root, "etc/libibverbs.d/rxe.driver"), 0o644); err != nil {
		return nil, err
	}

	// busybox and its applets, except where a real program of the same name
	// was copied (busybox prefers its own applets, so ip must stay iproute2's).
	if err := copyPath(filepath.Join(stage, "bin/busybox"), filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return nil, err
	}
	list, err := exec.Command(filepath.Join(root, "bin/busybox"), "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	taken := map[string]bool{"busybox": true, "init": true}
	for _, b := range guestBinaries {
		taken[filepath.Base(b)] = true
	}
	for _, a := range strings.Fields(string(list)) {
		if taken[a] {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(stage, "bin", a)); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	// The kernel's request_module() runs /sbin/modprobe.
	if err := os.Symlink("../bin/busybox", filepath.Join(stage, "sbin/modprobe")); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}

	// Kernel modules.
	order, err := stageModules(stage, kroot, kver)
	if err != nil {
		return nil, err
	}

	files := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":         "root:x:0:\n",
		"etc/hosts":         "127.0.0.1 localhost\n10.0.0.1 node\n10.3.0.1 node1\n10.3.0.2 node2\n",
		"etc/protocols":     "ip 0 IP\ntcp 6 TCP\nudp 17 UDP\n",
		"etc/services":      "perftest 18515/tcp\n",
		"etc/nsswitch.conf": "hosts: files\n",
		"etc/ibgo/kernel":   kver + "\n",
	}
	for p, s := range files {
		if err := os.WriteFile(filepath.Join(stage, p), []byte(s), 0o644); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func guestInitReader() io.Reader { return bytes.NewReader(guestInit) }

// stageModules copies the module closure (decompressing .ko.xz/.ko.zst, which
// busybox insmod cannot load), writes /etc/ibgo/modules in load order and a
// modules.dep for busybox modprobe.
func stageModules(stage, kroot, kver string) ([]string, error) {
	mdir := filepath.Join(kroot, "lib/modules", kver)
	index := map[string]string{} // module name -> path relative to mdir
	err := filepath.WalkDir(filepath.Join(mdir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := d.Name()
		for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
			if strings.HasSuffix(base, ext) {
				name := strings.ReplaceAll(strings.TrimSuffix(base, ext), "-", "_")
				rel, _ := filepath.Rel(mdir, p)
				index[name] = rel
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kernel modules of %s: %w", kver, err)
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(mdir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[strings.ReplaceAll(strings.TrimSuffix(filepath.Base(l), ".ko"), "-", "_")] = true
		}
	}
	sdir := filepath.Join(stage, "lib/modules", kver)
	deps := map[string][]string{}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, name), " -> "))
		}
		rel, ok := index[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			return fmt.Errorf("kernel %s has no module %s (needed by %s)", kver, name, strings.Join(chain, " -> "))
		}
		state[name] = 1
		dst := filepath.Join(sdir, strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(rel, ".xz"), ".zst"), ".gz"))
		if err := decompressTo(dst, filepath.Join(mdir, rel)); err != nil {
			return err
		}
		ds, err := moduleDepends(dst)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		for _, d := range ds {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		deps[name] = ds
		state[name] = 2
		r, _ := filepath.Rel(sdir, dst)
		order = append(order, r)
		return nil
	}
	args := map[string]string{}
	for _, m := range guestModules {
		if err := visit(m.name, []string{"guest"}); err != nil {
			return nil, err
		}
		args[m.name] = m.args
	}
	var lines, dep []string
	for _, r := range order {
		name := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(r), ".ko"), "-", "_")
		lines = append(lines, strings.TrimSpace(r+" "+args[name]))
	}
	// modules.dep: "path: dep-paths" with every transitive dependency, nearest
	// last-loaded first, as depmod writes it.
	pathOf := map[string]string{}
	for _, r := range order {
		pathOf[strings.ReplaceAll(strings.TrimSuffix(filepath.Base(r), ".ko"), "-", "_")] = r
	}
	for _, r := range order {
		name := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(r), ".ko"), "-", "_")
		seen := map[string]bool{}
		var all []string
		var walk func(n string)
		walk = func(n string) {
			for _, d := range deps[n] {
				if p, ok := pathOf[d]; ok && !seen[d] {
					seen[d] = true
					all = append(all, p)
					walk(d)
				}
			}
		}
		walk(name)
		dep = append(dep, r+": "+strings.Join(all, " "))
	}
	sort.Strings(dep)
	if err := os.WriteFile(filepath.Join(stage, "etc/ibgo/modules"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(sdir, "modules.dep"), []byte(strings.Join(dep, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	for _, f := range []string{"modules.builtin", "modules.order"} {
		_ = copyPath(filepath.Join(sdir, f), filepath.Join(mdir, f), 0o644)
	}
	return order, nil
}

// moduleDepends reads depends= from a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, errors.New("no .modinfo section")
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				out = append(out, strings.ReplaceAll(d, "-", "_"))
			}
			return out, nil
		}
	}
	return nil, nil
}

func decompressTo(dst, src string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	var tool string
	switch {
	case strings.HasSuffix(src, ".xz"):
		tool = "xz"
	case strings.HasSuffix(src, ".zst"):
		tool = "zstd"
	case strings.HasSuffix(src, ".gz"):
		tool = "gzip"
	default:
		return copyPath(dst, src, 0o644)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	cmd := exec.Command(tool, "-dc", src)
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		out.Close()
		return fmt.Errorf("%s -dc %s: %v: %s", tool, src, err, stderr.String())
	}
	return out.Close()
}

// libResolver copies the DT_NEEDED closure of ELF files, resolving sonames
// only inside the unpacked Debian packages (never from the host).
type libResolver struct {
	root, stage string
	done        map[string]bool
	dirs        []string
}

func newLibResolver(root, stage string) *libResolver {
	return &libResolver{root: root, stage: stage, done: map[string]bool{},
		dirs: []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/libibverbs", "lib64"}}
}

func (l *libResolver) closure(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	needed, err := f.ImportedLibraries()
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, so := range needed {
		if l.done[so] {
			continue
		}
		l.done[so] = true
		src := ""
		for _, d := range l.dirs {
			p := resolveIn(l.root, filepath.Join(d, so))
			if _, err := os.Stat(p); err == nil {
				src = p
				break
			}
		}
		if src == "" {
			return fmt.Errorf("%s needs %s, which none of the guest's Debian packages provide (add its package to userPackages in hwtest/vm/harness/image.go)",
				strings.TrimPrefix(path, l.root+"/"), so)
		}
		if err := copyPath(filepath.Join(l.stage, "lib/x86_64-linux-gnu", so), src, 0o755); err != nil {
			return err
		}
		if err := l.closure(src); err != nil {
			return err
		}
	}
	return nil
}

// resolveIn follows symlinks of rel inside root, treating absolute link
// targets as relative to root.
func resolveIn(root, rel string) string {
	p := filepath.Join(root, rel)
	for i := 0; i < 40; i++ {
		t, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if filepath.IsAbs(t) {
			p = filepath.Join(root, t)
		} else {
			p = filepath.Join(filepath.Dir(p), t)
		}
	}
	return p
}

// copyPath copies src (following symlinks) to dst.
func copyPath(dst, src string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return copyFile(dst, in, perm)
}

func copyFile(dst string, r io.Reader, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// extractVmlinux carves the compressed ELF kernel out of a bzImage (xz for
// Debian's 6.1, zstd for 6.12) so qemu can boot it through its PVH entry
// point, skipping the in-guest decompressor.
func extractVmlinux(bzImage, dst string) error {
	d, err := os.ReadFile(bzImage)
	if err != nil {
		return err
	}
	type codec struct {
		magic []byte
		cmd   []string
	}
	for _, c := range []codec{
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, []string{"xz", "-dc", "--single-stream"}},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd}, []string{"zstd", "-qdc"}},
	} {
		for off := 0; ; {
			i := bytes.Index(d[off:], c.magic)
			if i < 0 {
				break
			}
			off += i
			cmd := exec.Command(c.cmd[0], c.cmd[1:]...)
			cmd.Stdin = bytes.NewReader(d[off:])
			out, _ := cmd.Output() // trailing garbage makes the tools complain after a good stream
			if len(out) > 4 && bytes.Equal(out[:4], []byte("\x7fELF")) {
				return os.WriteFile(dst, out, 0o644)
			}
			off++
		}
	}
	return fmt.Errorf("no xz or zstd compressed ELF kernel found in %s", bzImage)
}
