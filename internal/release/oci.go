package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// OCI media types (image-spec v1.1 media-types.md).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationRefName tags a manifest or index in a layout's index.json;
	// skopeo's oci:DIR:TAG and umoci's DIR:TAG look it up.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Platform says what an image runs on (image-index platform object).
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// Descriptor points at a blob by digest (image-spec descriptor.md).
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ContainerConfig is the part of the image config a runtime executes
// (image-spec config.md, "config" object).
type ContainerConfig struct {
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// ImageConfig is the config blob of one platform's image.
type ImageConfig struct {
	Created      string          `json:"created,omitempty"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Variant      string          `json:"variant,omitempty"`
	Config       ContainerConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []History `json:"history,omitempty"`
}

// History is one entry of ImageConfig.History.
type History struct {
	Created   string `json:"created,omitempty"`
	CreatedBy string `json:"created_by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// Manifest is an image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Index is an image index (also the layout's index.json).
type Index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []Descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Image is one platform's image to build: a single layer from Files.
type Image struct {
	Platform Platform
	Config   ContainerConfig
	Files    []Entry
}

// Layout is an OCI image layout held in memory: file path (slash-separated,
// relative to the layout root) to contents. Not safe for concurrent
// mutation; reading it from several goroutines is fine.
type Layout struct {
	Files map[string][]byte
	// Index is the descriptor of the multi-platform image index that
	// index.json tags with the reference name.
	Index Descriptor
	// Layers has each platform's compressed layer descriptor, in the order
	// the images were given.
	Layers []Descriptor
}

// Digest returns "sha256:<hex>" of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (l *Layout) addBlob(mediaType string, b []byte) Descriptor {
	d := Descriptor{MediaType: mediaType, Digest: Digest(b), Size: int64(len(b))}
	l.Files["blobs/sha256/"+d.Digest[len("sha256:"):]] = b
	return d
}

func (l *Layout) addJSON(mediaType string, v any) (Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Descriptor{}, fmt.Errorf("release: encoding %s: %w", mediaType, err)
	}
	return l.addBlob(mediaType, b), nil
}

// BuildLayout builds an image layout holding one image index with one
// manifest per image, tagged ref in index.json. created dates the configs
// and every file in the layers; annotations go on the index and every
// manifest (the org.opencontainers.image.* keys).
func BuildLayout(images []Image, ref string, created time.Time, annotations map[string]string) (*Layout, error) {
	if len(images) == 0 {
		return nil, fmt.Errorf("release: an image index needs at least one image")
	}
	if ref == "" {
		return nil, fmt.Errorf("release: the layout needs a reference name (tag)")
	}
	l := &Layout{Files: map[string][]byte{}}
	ts := created.UTC().Format(time.RFC3339)
	idx := Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Annotations: annotations}
	seen := map[Platform]bool{}
	for _, im := range images {
		if im.Platform.OS == "" || im.Platform.Architecture == "" {
			return nil, fmt.Errorf("release: image without os/architecture: %+v", im.Platform)
		}
		if seen[im.Platform] {
			return nil, fmt.Errorf("release: two images for %s/%s", im.Platform.OS, im.Platform.Architecture)
		}
		seen[im.Platform] = true
		var tb bytes.Buffer
		if err := WriteTar(&tb, im.Files, created); err != nil {
			return nil, err
		}
		gz, err := Gzip(tb.Bytes())
		if err != nil {
			return nil, err
		}
		layer := l.addBlob(MediaTypeLayerGz, gz)
		l.Layers = append(l.Layers, layer)
		cfg := ImageConfig{Created: ts, Architecture: im.Platform.Architecture, OS: im.Platform.OS,
			Variant: im.Platform.Variant, Config: im.Config,
			History: []History{{Created: ts, CreatedBy: "make image-oci (ibgo internal/release)"}}}
		cfg.RootFS.Type = "layers"
		cfg.RootFS.DiffIDs = []string{Digest(tb.Bytes())}
		cd, err := l.addJSON(MediaTypeConfig, cfg)
		if err != nil {
			return nil, err
		}
		md, err := l.addJSON(MediaTypeManifest, Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest,
			Config: cd, Layers: []Descriptor{layer}, Annotations: annotations})
		if err != nil {
			return nil, err
		}
		p := im.Platform
		md.Platform = &p
		idx.Manifests = append(idx.Manifests, md)
	}
	id, err := l.addJSON(MediaTypeIndex, idx)
	if err != nil {
		return nil, err
	}
	l.Index = id
	top := id
	top.Annotations = map[string]string{AnnotationRefName: ref}
	b, err := json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{top}})
	if err != nil {
		return nil, err
	}
	l.Files["index.json"] = b
	l.Files["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	return l, nil
}

func (l *Layout) names() []string {
	var ns []string
	for n := range l.Files {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// WriteDir writes the layout under dir (created if missing). Blobs already
// there are replaced; other files in dir are left alone.
func (l *Layout) WriteDir(dir string) error {
	for _, n := range l.names() {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, l.Files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteTar writes the layout as a tar archive (what skopeo calls an
// oci-archive), entries dated mtime.
func (l *Layout) WriteTar(w io.Writer, mtime time.Time) error {
	dirs := map[string]bool{}
	var es []Entry
	for _, n := range l.names() {
		for d := filepath.ToSlash(filepath.Dir(n)); d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
			if !dirs[d] {
				dirs[d] = true
				es = append(es, Dir(d, 0o755))
			}
		}
		es = append(es, File(n, 0o644, l.Files[n]))
	}
	return WriteTar(w, es, mtime)
}

// ReadLayer returns the members of a gzipped tar layer, for checks.
func ReadLayer(gz []byte) ([]*tar.Header, map[string][]byte, error) {
	return readTarGz(gz)
}

func readTarGz(gz []byte) ([]*tar.Header, map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, nil, fmt.Errorf("release: layer is not gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	var hs []*tar.Header
	data := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs, data, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("release: layer tar after %d members: %w", len(hs), err)
		}
		hs = append(hs, h)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, nil, fmt.Errorf("release: layer member %q: %w", h.Name, err)
			}
			data[h.Name] = b
		}
	}
}
