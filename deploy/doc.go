// Package deploy holds ibgo's Kubernetes manifests (perftest pairs as an
// Indexed Job, the media driver as a DaemonSet or sidecar) and, in ship/, the
// packer behind `make dist` and `make image-oci`. Its tests decode every
// manifest strictly into the Kubernetes API types, so a misspelt field fails
// CI; the heavy k8s.io dependencies stay in these tests and never reach the
// ibgo binary. Guide: docs/deploy.md.
package deploy
