// Command ship packs ibgo's release artefacts from binaries `make dist`
// built: reproducible tarballs with the perftest links and a SHA256SUMS file
// (ship dist), and a multi-architecture OCI image layout plus its tar
// archive, made without a container daemon (ship image). mk/ship.mk runs it;
// see docs/deploy.md.
//
//	go run ./deploy/ship dist  -version V -date T -out dist -bin linux/amd64=dist/linux-amd64/ibgo ...
//	go run ./deploy/ship image -version V -revision SHA -source URL -date T \
//		-layout dist/ibgo-oci -archive dist/ibgo-V-oci.tar -bin linux/amd64=... -bin linux/arm64=...
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ibgo/ibgo/internal/release"
)

type binFlags map[release.Platform]string

func (b binFlags) String() string { return fmt.Sprint(map[release.Platform]string(b)) }

func (b binFlags) Set(v string) error {
	plat, file, ok := strings.Cut(v, "=")
	osName, arch, ok2 := strings.Cut(plat, "/")
	if !ok || !ok2 || osName == "" || arch == "" || file == "" {
		return fmt.Errorf("want OS/ARCH=FILE (linux/amd64=dist/linux-amd64/ibgo), got %q", v)
	}
	b[release.Platform{OS: osName, Architecture: arch}] = file
	return nil
}

// sorted returns the platforms in a fixed order (amd64 before arm64).
func (b binFlags) sorted() []release.Platform {
	var ps []release.Platform
	for p := range b {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		return ps[i].OS+"/"+ps[i].Architecture < ps[j].OS+"/"+ps[j].Architecture
	})
	return ps
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ship dist|image [flags]; see -h of each")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dist":
		err = cmdDist(os.Args[2:])
	case "image":
		err = cmdImage(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (dist, image)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ship:", err)
		os.Exit(1)
	}
}

func parseDate(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("-date is required (RFC 3339; mk/ship.mk uses the commit's time)")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-date %q: %v", s, err)
	}
	return t, nil
}

func cmdDist(args []string) error {
	fs := flag.NewFlagSet("dist", flag.ExitOnError)
	version := fs.String("version", "", "release version (names the tarballs)")
	date := fs.String("date", "", "timestamp of every archive member, RFC 3339")
	out := fs.String("out", "dist", "output directory")
	bins := binFlags{}
	fs.Var(bins, "bin", "OS/ARCH=FILE of a built ibgo (repeatable)")
	extras := extraFlags{}
	fs.Var(&extras, "extra", "NAME=FILE: also pack FILE as NAME in every tarball (man page, completions; repeatable)")
	fs.Parse(args)
	if *version == "" || len(bins) == 0 {
		return fmt.Errorf("dist needs -version and at least one -bin")
	}
	var extra []release.Entry
	for _, x := range extras {
		b, err := os.ReadFile(x.file)
		if err != nil {
			return err
		}
		extra = append(extra, release.File(x.name, 0o644, b))
	}
	mtime, err := parseDate(*date)
	if err != nil {
		return err
	}
	var sums strings.Builder
	for _, p := range bins.sorted() {
		bin, err := os.ReadFile(bins[p])
		if err != nil {
			return err
		}
		base := fmt.Sprintf("ibgo-%s-%s-%s", *version, p.OS, p.Architecture)
		var tb bytes.Buffer
		if err := release.WriteTar(&tb, distEntries(base, bin, extra), mtime); err != nil {
			return err
		}
		gz, err := release.Gzip(tb.Bytes())
		if err != nil {
			return err
		}
		name := base + ".tar.gz"
		if err := os.WriteFile(filepath.Join(*out, name), gz, 0o644); err != nil {
			return err
		}
		s := sha256.Sum256(gz)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(s[:]), name)
		fmt.Printf("%s: %d bytes (ibgo %d bytes)\n", filepath.Join(*out, name), len(gz), len(bin))
	}
	// sha256sum -c SHA256SUMS checks it.
	return os.WriteFile(filepath.Join(*out, "SHA256SUMS"), []byte(sums.String()), 0o644)
}

type extraFile struct{ name, file string }

type extraFlags []extraFile

func (e *extraFlags) String() string { return fmt.Sprint(*e) }

func (e *extraFlags) Set(v string) error {
	name, file, ok := strings.Cut(v, "=")
	if !ok || name == "" || file == "" {
		return fmt.Errorf("want NAME=FILE (share/man/man1/ibgo.1=dist/ibgo.1), got %q", v)
	}
	*e = append(*e, extraFile{name, file})
	return nil
}

// distEntries is one tarball's tree: base/ibgo, its links, and the extra
// files under base/ with the directories they need.
func distEntries(base string, bin []byte, extra []release.Entry) []release.Entry {
	es := release.BinaryEntries(base, bin)
	dirs := map[string]bool{base: true}
	for _, x := range extra {
		name := path.Join(base, x.Name)
		for d := path.Dir(name); !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			es = append(es, release.Dir(d, 0o755))
		}
		x.Name = name
		es = append(es, x)
	}
	return es
}

// ImageUser is the image's default user: the "nonroot" uid/gid distroless
// images use, so pods pass runAsNonRoot without a securityContext override.
const ImageUser = "65532:65532"

// imageFiles is the whole root file system of the image: ibgo and its
// links in /usr/bin, an /etc/passwd and /etc/group naming the nonroot user
// (so user lookups and the default Aeron directory work), and /tmp.
func imageFiles(bin []byte) []release.Entry {
	es := release.BinaryEntries("usr/bin", bin)
	return append(es,
		release.Dir("etc", 0o755),
		release.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		release.File("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")),
		release.Entry{Name: "home", Mode: os.ModeDir | 0o755},
		release.Entry{Name: "home/nonroot", Mode: os.ModeDir | 0o700, UID: 65532, GID: 65532},
		release.Entry{Name: "tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
	)
}

var badTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tag turns a version into a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}).
func Tag(version string) string {
	t := badTagChars.ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// buildImage is `ship image` without the flag parsing, for the tests.
func buildImage(bins map[release.Platform][]byte, order []release.Platform, version, revision, source string, created time.Time) (*release.Layout, error) {
	labels := map[string]string{
		"org.opencontainers.image.title":       "ibgo",
		"org.opencontainers.image.description": "RDMA verbs, perftest-compatible benchmarks and Aeron tools, in pure Go; one static binary",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
	var ims []release.Image
	for _, p := range order {
		ims = append(ims, release.Image{
			Platform: p,
			Config: release.ContainerConfig{
				User:       ImageUser,
				Env:        []string{"PATH=/usr/bin", "HOME=/home/nonroot"},
				Entrypoint: []string{"/usr/bin/ibgo"},
				WorkingDir: "/home/nonroot",
				Labels:     labels,
			},
			Files: imageFiles(bins[p]),
		})
	}
	return release.BuildLayout(ims, Tag(version), created, labels)
}

func cmdImage(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	version := fs.String("version", "", "image version (label and tag)")
	revision := fs.String("revision", "", "source commit (org.opencontainers.image.revision)")
	source := fs.String("source", "https://github.com/ibgo/ibgo", "source URL (org.opencontainers.image.source)")
	date := fs.String("date", "", "creation time, RFC 3339 (also every file's mtime)")
	layout := fs.String("layout", "dist/ibgo-oci", "OCI layout directory to (re)create")
	archive := fs.String("archive", "", "also write the layout as this tar file (an oci-archive)")
	bins := binFlags{}
	fs.Var(bins, "bin", "OS/ARCH=FILE of a built ibgo (repeatable)")
	fs.Parse(args)
	if *version == "" || *revision == "" || len(bins) == 0 {
		return fmt.Errorf("image needs -version, -revision and at least one -bin")
	}
	created, err := parseDate(*date)
	if err != nil {
		return err
	}
	data := map[release.Platform][]byte{}
	for p, f := range bins {
		if data[p], err = os.ReadFile(f); err != nil {
			return err
		}
	}
	order := bins.sorted()
	l, err := buildImage(data, order, *version, *revision, *source, created)
	if err != nil {
		return err
	}
	// The layout directory is ours: start it afresh so no stale blobs stay.
	if err := os.RemoveAll(*layout); err != nil {
		return err
	}
	if err := l.WriteDir(*layout); err != nil {
		return err
	}
	if *archive != "" {
		var tb bytes.Buffer
		if err := l.WriteTar(&tb, created); err != nil {
			return err
		}
		if err := os.WriteFile(*archive, tb.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %d bytes\n", *archive, tb.Len())
	}
	fmt.Printf("%s: index %s, tag %s\n", *layout, l.Index.Digest, Tag(*version))
	for i, p := range order {
		fmt.Printf("  %s/%s: compressed layer %d bytes (%.1f MiB)\n", p.OS, p.Architecture, l.Layers[i].Size, float64(l.Layers[i].Size)/(1<<20))
	}
	return nil
}
