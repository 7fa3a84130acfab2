package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// PerftestNames are the program names ibgo answers to when invoked through a
// link (argv[0] dispatch in cmd/ibgo): perftest's eight RC tests.
var PerftestNames = []string{
	"ib_write_bw", "ib_write_lat",
	"ib_read_bw", "ib_read_lat",
	"ib_send_bw", "ib_send_lat",
	"ib_atomic_bw", "ib_atomic_lat",
}

// ToolNames are the other programs ibgo answers to through a link:
// rdmacm-utils' rping.
var ToolNames = []string{"rping"}

// LinkNames are every link name ibgo is installed under (PerftestNames, then
// ToolNames).
func LinkNames() []string { return append(append([]string(nil), PerftestNames...), ToolNames...) }

// Entry is one member of an archive: a directory (Mode has fs.ModeDir), a
// symbolic link (fs.ModeSymlink, Link is the target) or a regular file
// (Data). Name is a slash-separated path relative to the archive root.
type Entry struct {
	Name     string
	Mode     fs.FileMode
	Link     string
	Data     []byte
	UID, GID int
}

// Dir, File and Symlink build entries owned by root.
func Dir(name string, perm fs.FileMode) Entry { return Entry{Name: name, Mode: fs.ModeDir | perm} }
func File(name string, perm fs.FileMode, data []byte) Entry {
	return Entry{Name: name, Mode: perm, Data: data}
}
func Symlink(name, target string) Entry {
	return Entry{Name: name, Mode: fs.ModeSymlink | 0o777, Link: target}
}

// BinaryEntries lays out ibgo and its links (LinkNames) under dir: dir/ibgo
// (0755) and dir/ib_write_bw -> ibgo and so on, plus dir itself and its
// parents ("usr/bin" gives "usr" and "usr/bin").
func BinaryEntries(dir string, ibgo []byte) []Entry {
	var es []Entry
	if dir != "" {
		parts := strings.Split(dir, "/")
		for i := range parts {
			es = append(es, Dir(strings.Join(parts[:i+1], "/"), 0o755))
		}
	}
	es = append(es, File(path.Join(dir, "ibgo"), 0o755, ibgo))
	for _, n := range LinkNames() {
		es = append(es, Symlink(path.Join(dir, n), "ibgo"))
	}
	return es
}

func (e Entry) check() error {
	clean := path.Clean(e.Name)
	if e.Name == "" || clean != e.Name || path.IsAbs(e.Name) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("release: entry name %q must be a clean relative path", e.Name)
	}
	if e.Mode&fs.ModeSymlink != 0 && e.Link == "" {
		return fmt.Errorf("release: symlink %q has no target", e.Name)
	}
	if e.Mode&^(fs.ModeDir|fs.ModeSymlink|fs.ModePerm|fs.ModeSticky) != 0 {
		return fmt.Errorf("release: entry %q has unsupported mode %v", e.Name, e.Mode)
	}
	return nil
}

// WriteTar writes the entries as a POSIX tar stream in name order (a parent
// sorts before its children), every member dated mtime, so the same inputs
// give the same bytes. Duplicate names are an error.
func WriteTar(w io.Writer, entries []Entry, mtime time.Time) error {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	tw := tar.NewWriter(w)
	for i, e := range sorted {
		if err := e.check(); err != nil {
			return err
		}
		if i > 0 && sorted[i-1].Name == e.Name {
			return fmt.Errorf("release: %q appears twice", e.Name)
		}
		h := &tar.Header{
			Name:    e.Name,
			Mode:    int64(e.Mode.Perm()),
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime.UTC().Truncate(time.Second),
			// Plain USTAR: no PAX records carrying access times or
			// anything else that would differ between builds.
			Format: tar.FormatUSTAR,
		}
		if e.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch {
		case e.Mode.IsDir():
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case e.Mode&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.Link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("release: tar header for %q: %w", e.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return fmt.Errorf("release: tar data for %q: %w", e.Name, err)
			}
		}
	}
	return tw.Close()
}

// Gzip compresses b at the best level with an empty gzip header (no name,
// no time), so the output depends on b alone.
func Gzip(b []byte) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
