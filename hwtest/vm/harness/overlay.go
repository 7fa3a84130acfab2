package harness

import (
	"os"
	"path"
	"sort"
	"strings"
)

// Overlay is a per-run initramfs appended to the cached image: the ibgo
// binary, test binaries, their testdata and the job script. The kernel
// unpacks it over the base archive.
type Overlay struct {
	files map[string]ovFile
}

type ovFile struct {
	host string // copy from this host path, or
	data []byte // these bytes
	perm uint32
}

// NewOverlay returns an empty overlay.
func NewOverlay() *Overlay { return &Overlay{files: map[string]ovFile{}} }

// AddFile copies a host file into the guest at guestPath (absolute).
func (o *Overlay) AddFile(guestPath, hostPath string, perm uint32) {
	o.files[strings.TrimPrefix(guestPath, "/")] = ovFile{host: hostPath, perm: perm}
}

// AddData writes data into the guest at guestPath.
func (o *Overlay) AddData(guestPath string, data []byte, perm uint32) {
	o.files[strings.TrimPrefix(guestPath, "/")] = ovFile{data: data, perm: perm}
}

// Write produces the overlay archive. Parent directories are emitted before
// their files (the kernel's unpacker does not create them).
func (o *Overlay) Write(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := newCpioWriter(f)
	dirs := map[string]bool{}
	var names []string
	for n := range o.files {
		names = append(names, n)
		for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds) // parents sort before children
	for _, d := range ds {
		w.Dir(d, 0o755)
	}
	sort.Strings(names)
	for _, n := range names {
		fl := o.files[n]
		if fl.host != "" {
			w.FileFrom(n, fl.perm, fl.host)
		} else {
			w.File(n, fl.perm, fl.data)
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
