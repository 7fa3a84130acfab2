package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/release"
	"github.com/ibgo/ibgo/internal/testutil"
)

// TestVersionEmbeddedByLinker links ibgo the way mk/ship.mk does and checks
// that `ibgo version` and `ibgo --version` print exactly what was embedded.
const linkedVersion, linkedCommit, linkedDate = "v9.8.7-test.1", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"

// linkedIbgo builds ibgo stamped as mk/ship.mk does into a temporary
// directory and returns that directory (for PATH).
func linkedIbgo(t *testing.T) string {
	if testing.Short() {
		t.Skip("links a binary; -short skips it")
	}
	testutil.HostOnly(t, "links a binary with the go command")
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "ibgo"), "-ldflags",
		"-s -w -X main.version="+linkedVersion+" -X main.commit="+linkedCommit+" -X main.buildDate="+linkedDate, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir
}

func TestVersionEmbeddedByLinker(t *testing.T) {
	bin := filepath.Join(linkedIbgo(t), "ibgo")
	const v, c, d = linkedVersion, linkedCommit, linkedDate

	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Equal(t, "ibgo "+v, lines[0], "%v", args)
		require.Equal(t, "commit: "+c, lines[1], "%v", args)
		require.Equal(t, "built: "+d, lines[2], "%v", args)
		require.True(t, strings.HasPrefix(lines[3], "go: go1."), lines[3])
	}
	out, err := exec.Command(bin, "version", "--short").Output()
	require.NoError(t, err)
	require.Equal(t, v+"\n", string(out))
}

func TestVersionUnsetSaysDevel(t *testing.T) {
	code, out, _ := runIbgo(t, "version", "--short")
	require.Equal(t, 0, code)
	require.Equal(t, "devel\n", out, "go test binaries carry no version")
	code, out, _ = runIbgo(t, "--version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "ibgo devel\ncommit: ")
}

// The links shipped in tarballs and images are exactly the names argv[0]
// dispatch answers to.
func TestShippedPerftestLinksDispatch(t *testing.T) {
	for _, n := range release.PerftestNames {
		_, ok := perftestProgram("/usr/bin/" + n)
		require.True(t, ok, "%s is shipped as a link but ibgo does not answer to it", n)
	}
	var usage string
	for _, c := range commands {
		if c.Name == "perf" {
			usage = c.Usage
		}
	}
	require.NotEmpty(t, usage)
	for _, n := range release.PerftestNames {
		require.Contains(t, usage, strings.TrimPrefix(n, "ib_"))
	}
	// Every test the perf command lists has a link.
	inner := usage[strings.Index(usage, "<")+1 : strings.Index(usage, ">")]
	require.Len(t, strings.Split(inner, "|"), len(release.PerftestNames), "perf lists %s", inner)
}
