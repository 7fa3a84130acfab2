package harness

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cpioWriter writes a "newc" (SVR4, no CRC) archive: the format the kernel
// unpacks as an initramfs. Archives may be concatenated; the kernel unpacks
// each in turn, later entries replacing earlier ones.
type cpioWriter struct {
	w   *bufio.Writer
	ino uint32
	n   int64
	err error
}

func newCpioWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20)} }

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	var n int
	n, c.err = c.w.Write(b)
	c.n += int64(n)
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) header(name string, mode uint32, size int64, mtime int64) {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, mtime, size, 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(h))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad()
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string, perm uint32) {
	c.header(name, 0o040000|perm, 0, 0)
}

// File adds a regular file with contents data.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.header(name, 0o100000|perm, int64(len(data)), 0)
	c.write(data)
	c.pad()
}

// FileFrom adds a regular file copied from path on the host.
func (c *cpioWriter) FileFrom(name string, perm uint32, path string) {
	if c.err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		c.err = err
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.err = err
		return
	}
	c.header(name, 0o100000|perm, st.Size(), 0)
	if c.err != nil {
		return
	}
	n, err := io.Copy(c.w, f)
	c.n += n
	if err != nil {
		c.err = err
		return
	}
	if n != st.Size() {
		c.err = fmt.Errorf("%s changed size while archiving", path)
		return
	}
	c.pad()
}

// Symlink adds a symbolic link.
func (c *cpioWriter) Symlink(name, target string) {
	c.header(name, 0o120777, int64(len(target)), 0)
	c.write([]byte(target))
	c.pad()
}

// Tree adds every entry below root (a staging directory), in sorted order,
// with paths relative to root. Permissions are kept; owners become root.
func (c *cpioWriter) Tree(root string) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		c.err = err
		return
	}
	sort.Strings(paths)
	for _, p := range paths {
		rel := strings.TrimPrefix(p, root+string(os.PathSeparator))
		st, err := os.Lstat(p)
		if err != nil {
			c.err = err
			return
		}
		perm := uint32(st.Mode().Perm())
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				c.err = err
				return
			}
			c.Symlink(rel, t)
		case st.IsDir():
			c.Dir(rel, perm)
		case st.Mode().IsRegular():
			c.FileFrom(rel, perm, p)
		default:
			c.err = fmt.Errorf("%s: unsupported file type %v in initramfs stage", p, st.Mode().Type())
		}
		if c.err != nil {
			return
		}
	}
}

// Close writes the trailer and flushes.
func (c *cpioWriter) Close() error {
	c.header("TRAILER!!!", 0, 0, 0)
	c.pad()
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}
