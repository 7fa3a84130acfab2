package release

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var when = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestWriteTarIsDeterministicAndSorted(t *testing.T) {
	es := BinaryEntries("usr/bin", []byte("ELF..."))
	var a, b bytes.Buffer
	require.NoError(t, WriteTar(&a, es, when))
	// Reverse the input: the output must not change.
	rev := append([]Entry(nil), es...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	require.NoError(t, WriteTar(&b, rev, when))
	require.Equal(t, a.Bytes(), b.Bytes())

	gz, err := Gzip(a.Bytes())
	require.NoError(t, err)
	gz2, err := Gzip(b.Bytes())
	require.NoError(t, err)
	require.Equal(t, gz, gz2)
	hs, data, err := readTarGz(gz)
	require.NoError(t, err)
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
		require.True(t, h.ModTime.Equal(when), h.Name)
		require.Zero(t, h.Uid)
	}
	require.Equal(t, "usr/", names[0])
	require.Equal(t, "usr/bin/", names[1])
	require.Len(t, names, 2+1+len(LinkNames()))
	require.Equal(t, []byte("ELF..."), data["usr/bin/ibgo"])
	for _, h := range hs[2:] {
		if h.Name == "usr/bin/ibgo" {
			require.Equal(t, int64(0o755), h.Mode)
			continue
		}
		require.Equal(t, byte(tar.TypeSymlink), h.Typeflag, h.Name)
		require.Equal(t, "ibgo", h.Linkname)
		require.Contains(t, LinkNames(), strings.TrimPrefix(h.Name, "usr/bin/"), h.Name)
	}
}

func TestWriteTarRejectsBadEntries(t *testing.T) {
	for _, e := range []Entry{
		{Name: "/abs", Mode: 0o644},
		{Name: "../up", Mode: 0o644},
		{Name: "a//b", Mode: 0o644},
		{Name: "", Mode: 0o644},
		{Name: "l", Mode: fs.ModeSymlink},
		{Name: "dev", Mode: fs.ModeDevice},
	} {
		err := WriteTar(&bytes.Buffer{}, []Entry{e}, when)
		require.Error(t, err, "%+v", e)
		require.Contains(t, err.Error(), "release:")
	}
	err := WriteTar(&bytes.Buffer{}, []Entry{File("a", 0o644, nil), File("a", 0o600, nil)}, when)
	require.ErrorContains(t, err, `"a" appears twice`)
}

func decode[T any](t *testing.T, l *Layout, d Descriptor) T {
	t.Helper()
	b, ok := l.Files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	require.True(t, ok, "blob %s missing", d.Digest)
	require.Equal(t, d.Digest, Digest(b))
	require.Equal(t, d.Size, int64(len(b)))
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v))
	return v
}

// TestBuildLayoutIsConsistent walks the layout from index.json down to the
// layers and checks every digest, size, media type and the rootfs diff id.
func TestBuildLayoutIsConsistent(t *testing.T) {
	amd, arm := []byte("amd64 binary"), []byte("arm64 binary")
	ims := []Image{
		{Platform: Platform{OS: "linux", Architecture: "amd64"}, Config: ContainerConfig{User: "65532:65532", Entrypoint: []string{"/usr/bin/ibgo"}}, Files: BinaryEntries("usr/bin", amd)},
		{Platform: Platform{OS: "linux", Architecture: "arm64"}, Config: ContainerConfig{User: "65532:65532", Entrypoint: []string{"/usr/bin/ibgo"}}, Files: BinaryEntries("usr/bin", arm)},
	}
	l, err := BuildLayout(ims, "v1.2.3", when, map[string]string{"org.opencontainers.image.version": "v1.2.3"})
	require.NoError(t, err)
	require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(l.Files["oci-layout"]))

	var top Index
	require.NoError(t, json.Unmarshal(l.Files["index.json"], &top))
	require.Len(t, top.Manifests, 1)
	require.Equal(t, "v1.2.3", top.Manifests[0].Annotations[AnnotationRefName])
	require.Equal(t, MediaTypeIndex, top.Manifests[0].MediaType)
	idx := decode[Index](t, l, top.Manifests[0])
	require.Equal(t, 2, idx.SchemaVersion)
	require.Len(t, idx.Manifests, 2)
	for i, md := range idx.Manifests {
		require.Equal(t, MediaTypeManifest, md.MediaType)
		require.Equal(t, ims[i].Platform, *md.Platform)
		m := decode[Manifest](t, l, md)
		require.Equal(t, "v1.2.3", m.Annotations["org.opencontainers.image.version"])
		cfg := decode[ImageConfig](t, l, m.Config)
		require.Equal(t, ims[i].Platform.Architecture, cfg.Architecture)
		require.Equal(t, "65532:65532", cfg.Config.User)
		require.Equal(t, when.Format(time.RFC3339), cfg.Created)
		require.Len(t, m.Layers, 1)
		require.Equal(t, MediaTypeLayerGz, m.Layers[0].MediaType)
		require.Equal(t, m.Layers[0], l.Layers[i])
		gz := l.Files["blobs/sha256/"+strings.TrimPrefix(m.Layers[0].Digest, "sha256:")]
		require.Equal(t, m.Layers[0].Digest, Digest(gz))
		_, data, err := readTarGz(gz)
		require.NoError(t, err)
		require.Equal(t, [][]byte{amd, arm}[i], data["usr/bin/ibgo"])
		var raw bytes.Buffer
		require.NoError(t, WriteTar(&raw, ims[i].Files, when))
		require.Equal(t, []string{Digest(raw.Bytes())}, cfg.RootFS.DiffIDs, "diff id is the uncompressed layer's digest")
	}
	// 2 layers + 2 configs + 2 manifests + 1 index + index.json + oci-layout.
	require.Len(t, l.Files, 9)

	again, err := BuildLayout(ims, "v1.2.3", when, map[string]string{"org.opencontainers.image.version": "v1.2.3"})
	require.NoError(t, err)
	require.Equal(t, l.Index.Digest, again.Index.Digest, "same inputs, same digest")
}

func TestBuildLayoutRejects(t *testing.T) {
	_, err := BuildLayout(nil, "x", when, nil)
	require.ErrorContains(t, err, "at least one image")
	im := Image{Platform: Platform{OS: "linux", Architecture: "amd64"}}
	_, err = BuildLayout([]Image{im, im}, "x", when, nil)
	require.ErrorContains(t, err, "two images for linux/amd64")
	_, err = BuildLayout([]Image{im}, "", when, nil)
	require.ErrorContains(t, err, "reference name")
	_, err = BuildLayout([]Image{{}}, "x", when, nil)
	require.ErrorContains(t, err, "without os/architecture")
}
