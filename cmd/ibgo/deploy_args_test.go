package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// ibgoInvocations finds every command line the manifests in deploy/ give
// the ibgo image: container args, and exec probe commands.
func ibgoInvocations(t *testing.T) map[string][]string {
	found := map[string][]string{}
	var walk func(where string, v any, image string)
	walk = func(where string, v any, image string) {
		switch x := v.(type) {
		case map[string]any:
			if img, ok := x["image"].(string); ok {
				image = img
			}
			if image == "ibgo" {
				if args, ok := x["args"].([]any); ok {
					found[where+".args"] = strs(args)
				}
				if cmd, ok := x["command"].([]any); ok && len(cmd) > 0 && cmd[0] == "/usr/bin/ibgo" {
					found[where+".command"] = strs(cmd[1:])
				}
			}
			for k, e := range x {
				walk(where+"."+k, e, image)
			}
		case []any:
			for i, e := range x {
				walk(where+"["+string(rune('0'+i))+"]", e, image)
			}
		}
	}
	require.NoError(t, filepath.WalkDir("../../deploy", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			var v any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &v), "%s", p)
			walk(p+"#"+string(rune('0'+i)), v, "")
		}
		return nil
	}))
	return found
}

func strs(a []any) []string {
	var s []string
	for _, e := range a {
		s = append(s, e.(string))
	}
	return s
}

// TestDeployManifestsUseRealFlags parses every ibgo command line in the
// manifests with ibgo's own CLI (asking for --help after the flags, so
// nothing runs): a renamed command or flag fails here, not in a cluster.
func TestDeployManifestsUseRealFlags(t *testing.T) {
	testutil.HostOnly(t, "reads the manifests in deploy/")
	inv := ibgoInvocations(t)
	require.GreaterOrEqual(t, len(inv), 8, "%v", inv)
	drivers := 0
	for where, args := range inv {
		if args[0] == "driver" {
			drivers++
		}
		line := append([]string(nil), args...)
		var perf []string
		if i := indexOf(line, "--"); i >= 0 {
			// perfjob: its own flags, then a perftest command line.
			line, perf = line[:i], line[i+1:]
		}
		code, out, stderr := runIbgo(t, append(line, "--help")...)
		require.Equal(t, 0, code, "%s: ibgo %s: %s", where, strings.Join(args, " "), stderr)
		require.Contains(t, out, "USAGE:", "%s", where)
		if perf != nil {
			code, out, stderr = runIbgo(t, append(append([]string{"perf"}, perf...), "-h")...)
			require.Equal(t, 0, code, "%s: ibgo perf %s: %s", where, strings.Join(perf, " "), stderr)
			require.NotEmpty(t, out)
		}
	}
	require.NotZero(t, drivers, "the manifests run `ibgo driver` (the DaemonSet and the sidecar example)")
}

func indexOf(s []string, v string) int {
	for i, e := range s {
		if e == v {
			return i
		}
	}
	return -1
}
