package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// object is one decoded manifest document.
type object struct {
	file string
	kind string
	obj  any
}

var docSplit = regexp.MustCompile(`(?m)^---\s*$`)

// decodeStrict decodes one YAML document into the API type its kind names,
// failing on unknown, duplicate or wrongly cased fields, as the API server's
// strict field validation does: YAML to JSON (sigs.k8s.io/yaml), then
// sigs.k8s.io/json's case-sensitive strict decoder (encoding/json alone
// would accept clusterIp for clusterIP).
func decodeStrict(doc []byte) (string, any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Service":
		obj = &corev1.Service{}
	case "v1 Pod":
		obj = &corev1.Pod{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "batch/v1 Job":
		obj = &batchv1.Job{}
	case "apps/v1 DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		obj = &kustomization{}
	default:
		return "", nil, fmt.Errorf("unexpected apiVersion/kind %q %q", tm.APIVersion, tm.Kind)
	}
	j, err := yaml.YAMLToJSONStrict(doc) // rejects duplicate keys
	if err != nil {
		return "", nil, err
	}
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return "", nil, err
	}
	if len(strict) > 0 {
		return "", nil, errors.Join(strict...)
	}
	return tm.Kind, obj, nil
}

// kustomization is the part of kustomize's Kustomization type these
// manifests use; strict decoding rejects anything else.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
}

func manifests(t *testing.T) []object {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	}))
	require.GreaterOrEqual(t, len(files), 10, "manifests found: %v", files)
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range docSplit.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			kind, obj, err := decodeStrict([]byte(doc))
			require.NoError(t, err, "%s document %d", f, i+1)
			objs = append(objs, object{f, kind, obj})
		}
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestStrictDecodingCatchesTypos(t *testing.T) {
	good := []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIP: None\n")
	_, _, err := decodeStrict(good)
	require.NoError(t, err)
	for _, bad := range []string{
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: None\n",                                                  // wrong case
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  name: y\n",                                                                 // duplicate
		"apiVersion: batch/v1\nkind: Job\nspec:\n  completionMode: Indexed\n  completion: 2\n",                                             // misspelt
		"apiVersion: v1\nkind: Servce\nmetadata:\n  name: x\n",                                                                             // unknown kind
		"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    securityContext:\n      capabilities:\n        add: IPC_LOCK\n", // not a list
	} {
		_, _, err := decodeStrict([]byte(bad))
		require.Error(t, err, "%s", bad)
	}
}

// podSpecs returns every pod template in the manifests with where it is.
func podSpecs(objs []object) map[string]*corev1.PodSpec {
	m := map[string]*corev1.PodSpec{}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *batchv1.Job:
			m[o.file+":"+v.Name] = &v.Spec.Template.Spec
		case *appsv1.DaemonSet:
			m[o.file+":"+v.Name] = &v.Spec.Template.Spec
		case *appsv1.Deployment:
			m[o.file+":"+v.Name] = &v.Spec.Template.Spec
		case *corev1.Pod:
			m[o.file+":"+v.Name] = &v.Spec
		}
	}
	return m
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs := manifests(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.kind]++
		if k, ok := o.obj.(*kustomization); ok {
			// Every file a kustomization names exists and decodes.
			dir := filepath.Dir(o.file)
			for _, r := range k.Resources {
				_, err := os.Stat(filepath.Join(dir, r))
				require.NoError(t, err, "%s: resource %s", o.file, r)
			}
			for _, p := range k.Patches {
				_, err := os.Stat(filepath.Join(dir, p.Path))
				require.NoError(t, err, "%s: patch %s", o.file, p.Path)
			}
			for _, im := range k.Images {
				require.Equal(t, "ibgo", im.Name, "%s: the manifests call the image ibgo", o.file)
			}
		}
	}
	require.Equal(t, map[string]int{"Kustomization": 3, "Service": 2, "Job": 2, "DaemonSet": 1, "Deployment": 1, "Pod": 1}, kinds)

	for where, spec := range podSpecs(objs) {
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			if c.Image != "" {
				require.Equal(t, "ibgo", c.Image, "%s/%s: images are set by kustomize's images:", where, c.Name)
			}
			if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
				for _, cap := range sc.Capabilities.Add {
					require.Equal(t, corev1.Capability("IPC_LOCK"), cap, "%s/%s adds only IPC_LOCK", where, c.Name)
				}
			}
		}
	}
}

func TestPerftestJobAndService(t *testing.T) {
	var job *batchv1.Job
	var svc *corev1.Service
	for _, o := range manifests(t) {
		if !strings.HasPrefix(o.file, "perftest/") {
			continue
		}
		switch v := o.obj.(type) {
		case *batchv1.Job:
			job = v
		case *corev1.Service:
			svc = v
		}
	}
	require.NotNil(t, job)
	require.NotNil(t, svc)
	require.Equal(t, batchv1.IndexedCompletion, *job.Spec.CompletionMode)
	require.EqualValues(t, 2, *job.Spec.Completions)
	require.EqualValues(t, 2, *job.Spec.Parallelism, "both pods run at once")
	require.Equal(t, "None", svc.Spec.ClusterIP, "headless")
	require.True(t, svc.Spec.PublishNotReadyAddresses)
	spec := job.Spec.Template.Spec
	require.Equal(t, svc.Name, spec.Subdomain, "pods are named through the Service")
	require.Equal(t, job.Name, svc.Name, "the peer name $(JOB_NAME)-0.<subdomain> assumes it")
	for k, v := range svc.Spec.Selector {
		require.Equal(t, v, job.Spec.Template.Labels[k], "the Service selects the Job's pods")
	}
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	require.Equal(t, "perfjob", c.Args[0])
	require.Contains(t, c.Args, "--peer=$(JOB_NAME)-0."+svc.Name)
	require.Equal(t, int32(18515), c.Ports[0].ContainerPort)
	require.Equal(t, int32(18515), svc.Spec.Ports[0].Port)
	require.Equal(t, []corev1.Capability{"IPC_LOCK"}, c.SecurityContext.Capabilities.Add)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	require.Equal(t, "metadata.labels['batch.kubernetes.io/job-name']", env["JOB_NAME"].ValueFrom.FieldRef.FieldPath)
	require.Contains(t, env, "IBGO_NETDEV")
	var rdma bool
	for name := range c.Resources.Limits {
		rdma = rdma || strings.HasPrefix(string(name), "rdma/")
	}
	require.True(t, rdma, "an RDMA device-plugin resource is requested")
	for _, dollar := range regexp.MustCompile(`\$\((\w+)\)`).FindAllStringSubmatch(strings.Join(c.Args, " "), -1) {
		require.Contains(t, env, dollar[1], "$(%s) in args is expanded from the container's env", dollar[1])
	}
}

func TestDriverProbesUseHeartbeat(t *testing.T) {
	n := 0
	for where, spec := range podSpecs(manifests(t)) {
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			if len(c.Args) == 0 || c.Args[0] != "driver" {
				continue
			}
			n++
			require.NotNil(t, c.LivenessProbe, "%s", where)
			for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe} {
				require.NotNil(t, p, "%s", where)
				require.Equal(t, []string{"/usr/bin/ibgo", "aeron", "health"}, p.Exec.Command[:3], "%s", where)
			}
			var dir string
			for _, e := range c.Env {
				if e.Name == "AERON_DIR" {
					dir = e.Value
				}
			}
			require.NotEmpty(t, dir, "%s: AERON_DIR", where)
			require.Contains(t, strings.Join(c.LivenessProbe.Exec.Command, " "), "--dir "+dir)
			var mounted bool
			for _, m := range c.VolumeMounts {
				mounted = mounted || m.MountPath == dir
			}
			require.True(t, mounted, "%s: the Aeron directory is a shared volume", where)
		}
	}
	require.Equal(t, 2, n, "the DaemonSet and the sidecar example")
}

func TestManifestsAreTidy(t *testing.T) {
	// Tabs in YAML are a classic copy-paste failure.
	require.NoError(t, filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.False(t, bytes.ContainsRune(b, '\t'), "%s has a tab", p)
		return nil
	}))
}
