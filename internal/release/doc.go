// Package release builds ibgo's release artefacts without outside tools: the
// reproducible tarballs of `make dist` and the OCI image layout of
// `make image-oci` (image index, manifests, configs and gzipped layer, with
// sha256 digests, as the OCI image-spec v1.1 describes), so that no Docker
// daemon, buildah or registry client is needed to make an image.
//
// Everything here is a pure function of its inputs (file contents, modes and
// one timestamp): the same commit gives byte-identical tarballs and image
// digests on any machine.
package release
