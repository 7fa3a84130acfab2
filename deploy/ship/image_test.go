package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/release"
)

// maxLayer is the target: under 15 MB compressed per architecture.
const maxLayer = 15_000_000

// needTools skips when skopeo or umoci is missing, unless
// REQUIRE_IMAGE_TOOLS=1 (make test-image) turns that into a failure.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("REQUIRE_IMAGE_TOOLS") == "1" {
				t.Fatalf("%s not found and REQUIRE_IMAGE_TOOLS=1: apt-get install skopeo umoci", tool)
			}
			t.Skipf("%s not found (apt-get install skopeo umoci); make test-image requires it", tool)
		}
	}
}

func runTool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err)
	return out
}

type imageUnderTest struct {
	layout, tag, version, revision string
	real                           bool // the layout holds real ibgo binaries (make test-image)
}

// theImage is the layout make test-image built (IBGO_OCI_LAYOUT), else one
// built here from stand-in binaries, so `go test ./...` checks the format
// with the standard tools too, wherever they are installed.
func theImage(t *testing.T) imageUnderTest {
	if dir := os.Getenv("IBGO_OCI_LAYOUT"); dir != "" {
		v := os.Getenv("IBGO_OCI_VERSION")
		require.NotEmpty(t, v, "IBGO_OCI_VERSION must accompany IBGO_OCI_LAYOUT")
		return imageUnderTest{layout: dir, tag: Tag(v), version: v, revision: os.Getenv("IBGO_OCI_REVISION"), real: true}
	}
	amd := release.Platform{OS: "linux", Architecture: "amd64"}
	arm := release.Platform{OS: "linux", Architecture: "arm64"}
	bins := map[release.Platform][]byte{amd: []byte("\x7fELF stand-in amd64"), arm: []byte("\x7fELF stand-in arm64")}
	l, err := buildImage(bins, []release.Platform{amd, arm}, "v0.0.0-test+1", "abc123", "https://example.invalid/ibgo", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, l.WriteDir(dir))
	return imageUnderTest{layout: dir, tag: Tag("v0.0.0-test+1"), version: "v0.0.0-test+1", revision: "abc123"}
}

func TestTag(t *testing.T) {
	require.Equal(t, "v0.1.0-3-gabc-dirty", Tag("v0.1.0-3-gabc-dirty"))
	require.Equal(t, "v1.0.0-rc1-build.5", Tag("v1.0.0-rc1+build.5"))
	require.Equal(t, "v-x", Tag("-x"))
	require.Equal(t, "v", Tag(""))
}

// TestImageInspectAndUnpack checks the image with skopeo and umoci as a
// user's tools would see it: an index of amd64 and arm64, labels, the
// non-root user and entrypoint, then the amd64 root file system unpacked
// by umoci, compared with our own reading of the layer.
func TestImageInspectAndUnpack(t *testing.T) {
	needTools(t, "skopeo", "umoci")
	im := theImage(t)
	ref := "oci:" + im.layout + ":" + im.tag

	var idx release.Index
	require.NoError(t, json.Unmarshal(runTool(t, "skopeo", "inspect", "--raw", ref), &idx))
	require.Equal(t, release.MediaTypeIndex, idx.MediaType)
	var archs []string
	for _, m := range idx.Manifests {
		archs = append(archs, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	require.Equal(t, []string{"linux/amd64", "linux/arm64"}, archs)

	for _, arch := range []string{"amd64", "arm64"} {
		var info struct {
			Architecture, Os string
			Labels           map[string]string
			Layers           []string
		}
		require.NoError(t, json.Unmarshal(runTool(t, "skopeo", "inspect", "--override-arch", arch, ref), &info))
		require.Equal(t, arch, info.Architecture)
		require.Equal(t, "linux", info.Os)
		require.Equal(t, im.version, info.Labels["org.opencontainers.image.version"])
		require.NotEmpty(t, info.Labels["org.opencontainers.image.source"])
		if im.revision != "" {
			require.Equal(t, im.revision, info.Labels["org.opencontainers.image.revision"])
		}
		require.Len(t, info.Layers, 1, "from scratch: one layer")

		var cfg release.ImageConfig
		require.NoError(t, json.Unmarshal(runTool(t, "skopeo", "inspect", "--config", "--override-arch", arch, ref), &cfg))
		require.Equal(t, ImageUser, cfg.Config.User)
		require.Equal(t, []string{"/usr/bin/ibgo"}, cfg.Config.Entrypoint)

		// Compressed size per architecture, from the manifest skopeo reads.
		var m release.Manifest
		require.NoError(t, json.Unmarshal(runTool(t, "skopeo", "inspect", "--raw", "--override-arch", arch, ref), &m))
		if m.MediaType == release.MediaTypeIndex {
			// skopeo 1.9 prints the index for --raw; find the manifest ourselves.
			for _, d := range idx.Manifests {
				if d.Platform.Architecture == arch {
					b, err := os.ReadFile(filepath.Join(im.layout, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
					require.NoError(t, err)
					require.NoError(t, json.Unmarshal(b, &m))
				}
			}
		}
		require.Len(t, m.Layers, 1)
		t.Logf("%s: compressed layer %d bytes", arch, m.Layers[0].Size)
		require.Less(t, m.Layers[0].Size, int64(maxLayer), "%s image is over 15 MB compressed", arch)
	}

	// Unpack amd64 with umoci (which wants a single-manifest tag: skopeo
	// picks it out of the index).
	tmp := t.TempDir()
	single := filepath.Join(tmp, "single")
	runTool(t, "skopeo", "copy", "--quiet", "--override-arch", "amd64", ref, "oci:"+single+":"+im.tag)
	bundle := filepath.Join(tmp, "bundle")
	runTool(t, "umoci", "unpack", "--rootless", "--image", single+":"+im.tag, bundle)

	var spec struct {
		Process struct {
			User struct{ UID, GID int }
			Args []string
			Env  []string
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &spec))
	require.Equal(t, 65532, spec.Process.User.UID)
	require.Equal(t, 65532, spec.Process.User.GID)
	require.Equal(t, []string{"/usr/bin/ibgo"}, spec.Process.Args)
	require.Contains(t, spec.Process.Env, "PATH=/usr/bin")

	// What umoci unpacked is exactly what our own reader sees in the layer.
	rootfs := filepath.Join(bundle, "rootfs")
	got := map[string]string{}
	require.NoError(t, filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == rootfs {
			return err
		}
		rel, _ := filepath.Rel(rootfs, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		got[filepath.ToSlash(rel)] = desc
		return nil
	}))
	layerBlob := layerOf(t, single)
	hs, data, err := release.ReadLayer(layerBlob)
	require.NoError(t, err)
	want := map[string]string{}
	for _, h := range hs {
		fi := h.FileInfo()
		desc := fi.Mode().String()
		if h.Typeflag == tar.TypeSymlink {
			desc += " -> " + h.Linkname
		}
		want[strings.TrimSuffix(h.Name, "/")] = desc
		if h.Name == "home/nonroot/" {
			require.Equal(t, 65532, h.Uid, "the nonroot home belongs to the nonroot user")
		}
	}
	require.Equal(t, want, got)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	wantNames := []string{"etc", "etc/group", "etc/passwd", "home", "home/nonroot", "tmp", "usr", "usr/bin", "usr/bin/ibgo"}
	for _, n := range release.LinkNames() {
		wantNames = append(wantNames, "usr/bin/"+n)
	}
	sort.Strings(wantNames)
	require.Equal(t, wantNames, names, "nothing but ibgo, its links and the nonroot user's files: no shell, no libc")
	require.Equal(t, "-rwxr-xr-x", got["usr/bin/ibgo"])
	require.Equal(t, "dtrwxrwxrwx", got["tmp"])
	for _, n := range release.LinkNames() {
		require.Equal(t, "Lrwxrwxrwx -> ibgo", got["usr/bin/"+n])
	}
	bin, err := os.ReadFile(filepath.Join(rootfs, "usr/bin/ibgo"))
	require.NoError(t, err)
	require.Equal(t, data["usr/bin/ibgo"], bin)

	if im.real && runtimeIsAmd64() {
		// The unpacked binary is the one the build stamped.
		out := runTool(t, filepath.Join(rootfs, "usr/bin/ibgo"), "version", "--short")
		require.Equal(t, im.version+"\n", string(out))
		// Through a link it is perftest.
		out = runTool(t, filepath.Join(rootfs, "usr/bin/ib_write_bw"), "--version")
		require.Contains(t, string(out), "Version:")
	}
}

// layerOf returns the one compressed layer of the single-manifest layout.
func layerOf(t *testing.T, layout string) []byte {
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	require.NoError(t, err)
	var idx release.Index
	require.NoError(t, json.Unmarshal(b, &idx))
	require.Len(t, idx.Manifests, 1)
	blob := func(d string) []byte {
		b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")))
		require.NoError(t, err)
		require.Equal(t, d, release.Digest(b))
		return b
	}
	var m release.Manifest
	require.NoError(t, json.Unmarshal(blob(idx.Manifests[0].Digest), &m))
	require.Len(t, m.Layers, 1)
	return blob(m.Layers[0].Digest)
}

// TestImageArchive checks that the tar of the layout is an oci-archive
// skopeo reads.
func TestImageArchive(t *testing.T) {
	needTools(t, "skopeo")
	amd := release.Platform{OS: "linux", Architecture: "amd64"}
	l, err := buildImage(map[release.Platform][]byte{amd: []byte("x")}, []release.Platform{amd}, "v1", "r", "s", time.Unix(0, 0))
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "img.tar")
	out, err := os.Create(f)
	require.NoError(t, err)
	require.NoError(t, l.WriteTar(out, time.Unix(0, 0)))
	require.NoError(t, out.Close())
	var info struct{ Digest string }
	require.NoError(t, json.Unmarshal(runTool(t, "skopeo", "inspect", "oci-archive:"+f+":v1"), &info))
	require.NotEmpty(t, info.Digest)
}

func runtimeIsAmd64() bool { return runtime.GOARCH == "amd64" && runtime.GOOS == "linux" }

func TestDistEntries(t *testing.T) {
	es := distEntries("ibgo-v1-linux-amd64", []byte("bin"), []release.Entry{
		release.File("share/man/man1/ibgo.1", 0o644, []byte(".TH")),
		release.File("share/zsh/site-functions/_ibgo", 0o644, []byte("#compdef")),
	})
	got := map[string]os.FileMode{}
	for _, e := range es {
		_, dup := got[e.Name]
		require.False(t, dup, "%s twice", e.Name)
		got[e.Name] = e.Mode
	}
	for _, d := range []string{"ibgo-v1-linux-amd64", "ibgo-v1-linux-amd64/share", "ibgo-v1-linux-amd64/share/man", "ibgo-v1-linux-amd64/share/man/man1", "ibgo-v1-linux-amd64/share/zsh/site-functions"} {
		require.True(t, got[d].IsDir(), d)
	}
	require.Equal(t, os.FileMode(0o644), got["ibgo-v1-linux-amd64/share/man/man1/ibgo.1"])
	require.Equal(t, os.FileMode(0o755), got["ibgo-v1-linux-amd64/ibgo"])
	require.NoError(t, release.WriteTar(io.Discard, es, time.Unix(0, 0)))
}
