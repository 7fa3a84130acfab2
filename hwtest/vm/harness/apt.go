package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Logf receives progress messages (nil: quiet).
type Logf func(format string, args ...any)

// hostTool maps a command the harness needs to the Debian package that has it.
var hostTools = []struct{ cmd, pkg string }{
	{"qemu-system-x86_64", "qemu-system-x86"},
	{"dpkg-deb", "dpkg"},
	{"apt-get", "apt"},
	{"xz", "xz-utils"},
	{"zstd", "zstd"},
}

var aptUpdated sync.Once

// EnsureHostTools checks for qemu and the unpacking tools and installs what is
// missing with apt-get (as root), saying so. It fails with a message that
// names the packages when it cannot install them.
func EnsureHostTools(logf Logf) error {
	var missing []string
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.cmd); err != nil {
			missing = append(missing, t.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("the VM harness needs %s and there is no apt-get here to install them; install them by hand", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the VM harness needs %s; install them with: sudo apt-get install -y --no-install-recommends %s",
			strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	logf("installing missing host packages with apt-get: %s", strings.Join(missing, " "))
	if err := aptUpdate(logf); err != nil {
		return err
	}
	args := append([]string{"install", "-y", "--no-install-recommends"}, missing...)
	cmd := exec.Command("apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s failed: %v\n%s", strings.Join(missing, " "), err, tail(string(out), 20))
	}
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.cmd); err != nil {
			return fmt.Errorf("%s still missing after installing %s", t.cmd, t.pkg)
		}
	}
	return nil
}

func aptUpdate(logf Logf) error {
	var err error
	aptUpdated.Do(func() {
		if os.Geteuid() != 0 {
			err = errors.New("apt package lists are missing or stale and only root can run apt-get update")
			return
		}
		logf("running apt-get update")
		out, e := exec.Command("apt-get", "update").CombinedOutput()
		if e != nil {
			err = fmt.Errorf("apt-get update failed: %v\n%s", e, tail(string(out), 20))
		}
	})
	return err
}

// debPkg is one resolved package.
type debPkg struct {
	Name, Version, Arch string
}

func (p debPkg) String() string { return p.Name + "=" + p.Version }

// file is the name apt-get download gives the .deb.
func (p debPkg) file() string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_" + p.Arch + ".deb"
}

// resolve asks apt for the candidate version of each package.
func resolve(logf Logf, names []string) ([]debPkg, error) {
	out, err := aptCache(logf, append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return nil, err
	}
	got := map[string]debPkg{}
	var cur debPkg
	flush := func() {
		if cur.Name != "" {
			if _, dup := got[cur.Name]; !dup {
				got[cur.Name] = cur
			}
		}
		cur = debPkg{}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			cur.Name = v
		case "Version":
			cur.Version = v
		case "Architecture":
			cur.Arch = v
		}
	}
	flush()
	var pkgs []debPkg
	for _, n := range names {
		p, ok := got[n]
		if !ok || p.Version == "" {
			return nil, fmt.Errorf("apt has no candidate for package %s (check /etc/apt/sources.list: the harness needs Debian bookworm main and bookworm-security)", n)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// aptCache runs apt-cache, running apt-get update once and retrying when the
// package lists do not know the packages.
func aptCache(logf Logf, args ...string) ([]byte, error) {
	out, err := exec.Command("apt-cache", args...).Output()
	if err == nil && len(bytes.TrimSpace(out)) > 0 {
		return out, nil
	}
	if uerr := aptUpdate(logf); uerr != nil {
		return nil, fmt.Errorf("apt-cache %s: %v; %v", strings.Join(args, " "), err, uerr)
	}
	out, err = exec.Command("apt-cache", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("apt-cache %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		return nil, fmt.Errorf("apt-cache %s: %v", strings.Join(args, " "), err)
	}
	return out, nil
}

// resolveKernel finds the linux-image-<version> package a meta package
// (linux-image-amd64, linux-image-6.12-amd64) currently depends on. The
// archive drops old ABI numbers, so the version is never hard-coded.
func resolveKernel(logf Logf, meta string) (string, error) {
	if strings.HasPrefix(meta, "linux-image-") && !strings.HasSuffix(meta, "-amd64") {
		return "", fmt.Errorf("kernel package %q: expected linux-image-...-amd64", meta)
	}
	out, err := aptCache(logf, "depends", meta)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") && f[1] != meta {
			return f[1], nil
		}
	}
	// Not a meta package: it is the versioned image itself.
	if strings.Contains(meta, ".") {
		return meta, nil
	}
	return "", fmt.Errorf("apt-cache depends %s names no linux-image package", meta)
}

// download fetches the .debs that are not yet in dir.
func download(logf Logf, dir string, pkgs []debPkg) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var need []string
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, p.file())); err != nil {
			need = append(need, p.String())
		}
	}
	if len(need) == 0 {
		return nil
	}
	sort.Strings(need)
	logf("downloading %d packages with apt-get download", len(need))
	cmd := exec.Command("apt-get", append([]string{"download", "-q"}, need...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("apt-get download failed: %v\n%s", err, tail(string(out), 20))
	}
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, p.file())); err != nil {
			return fmt.Errorf("apt-get download did not produce %s", p.file())
		}
	}
	return nil
}

// extract unpacks a .deb into root (dpkg-deb -x: files only, no scripts).
func extract(deb, root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %v\n%s", filepath.Base(deb), err, out)
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
