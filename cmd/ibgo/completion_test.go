package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// TestBashCompletionLoadsAndCompletes checks the bash script with bash -n,
// sources it in a real bash and runs its completion function against a
// built ibgo, as bash would on TAB.
func TestBashCompletionLoadsAndCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	code, script, _ := runIbgo(t, "completion", "bash")
	require.Equal(t, 0, code)
	dir := linkedIbgo(t)
	file := filepath.Join(t.TempDir(), "ibgo.bash")
	require.NoError(t, os.WriteFile(file, []byte(script), 0o644))
	out, err := exec.Command(bash, "-n", file).CombinedOutput()
	require.NoError(t, err, "bash -n: %s", out)

	complete := func(line ...string) []string {
		t.Helper()
		// COMP_WORDS is the line so far; the last word is being completed.
		prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _ibgo_complete; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, append([]string{"-c", prog, "bash", file}, line...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}
	require.Equal(t, []string{"aeron"}, complete("ibgo", "aer"))
	require.Equal(t, []string{"perf", "perfjob"}, complete("ibgo", "perf"))
	require.Equal(t, []string{"health"}, complete("ibgo", "aeron", "hea"))
	require.Equal(t, []string{"--timeout"}, complete("ibgo", "aeron", "health", "--ti"))
	require.Contains(t, complete("ibgo", ""), "completion")
	// After "--" nothing is asked of ibgo (it would run the command).
	require.Empty(t, complete("ibgo", "perfjob", "--", "wr"))

	out, err = exec.Command(bash, "-c", `source "$1" && complete -p ibgo`, "bash", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "-F _ibgo_complete ibgo")
}

func TestZshAndFishCompletion(t *testing.T) {
	code, out, _ := runIbgo(t, "completion", "zsh")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "#compdef ibgo\n"))
	if zsh, err := exec.LookPath("zsh"); err == nil {
		file := filepath.Join(t.TempDir(), "_ibgo")
		require.NoError(t, os.WriteFile(file, []byte(out), 0o644))
		b, err := exec.Command(zsh, "-n", file).CombinedOutput()
		require.NoError(t, err, "zsh -n: %s", b)
		// Run the completion function with compadd stubbed to print what
		// it would offer (zsh itself filters by the typed prefix).
		cmd := exec.Command(zsh, "-f", "-c", `autoload -Uz compinit && compinit -u -d "$2"; source "$1"; `+
			`words=(ibgo aeron he); CURRENT=3; compadd() { shift; print -l -- ${(P)1}; }; _ibgo`,
			"zsh", file, filepath.Join(t.TempDir(), "zcompdump"))
		cmd.Env = append(os.Environ(), "PATH="+linkedIbgo(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
		b, err = cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		require.Contains(t, strings.Fields(string(b)), "health")
	}

	code, out, _ = runIbgo(t, "completion", "fish")
	require.Equal(t, 0, code)
	for _, want := range []string{
		"complete -c ibgo ",
		"-a 'aeron'", "-a 'perfjob'", "-a 'health'", "-a 'metrics'",
		"-l timeout", "-l listen", "-l netdev",
	} {
		require.Contains(t, out, want)
	}
	if fish, err := exec.LookPath("fish"); err == nil {
		file := filepath.Join(t.TempDir(), "ibgo.fish")
		require.NoError(t, os.WriteFile(file, []byte(out), 0o644))
		b, err := exec.Command(fish, "--no-execute", file).CombinedOutput()
		require.NoError(t, err, "fish --no-execute: %s", b)
		cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C "ibgo aeron health --ti"`, file)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		b, err = cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		require.True(t, strings.HasPrefix(string(b), "--timeout\t"), "%q", b)
	}

	code, _, stderr := runIbgo(t, "completion", "tcsh")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no script for "tcsh"; shells are bash, zsh and fish`)
	code, _, stderr = runIbgo(t, "completion")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "ibgo completion bash|zsh|fish")
}

func TestManPage(t *testing.T) {
	code, out, _ := runIbgo(t, "man")
	require.Equal(t, 0, code)
	require.Contains(t, out, ".TH ibgo 1")
	for _, c := range commands {
		require.Contains(t, out, "\n.SH "+strings.ToUpper("commands"), "a COMMANDS section")
		require.Contains(t, out, c.Name, "command %s is in the page", c.Name)
	}
	require.Contains(t, out, "AERON_DIR")
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("no groff: the page's roff is not rendered")
		return
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Empty(t, string(b), "groff warnings")
}

// TestNewCommandsHelp: every command and subcommand of the app (walked from
// the registered command list, so a new command cannot slip through) says in
// its --help what it does, shows an example and names the environment
// variables it reads (or says it reads none).
func TestNewCommandsHelp(t *testing.T) {
	var paths [][]string
	var walk func(prefix []string, cs []*cli.Command)
	walk = func(prefix []string, cs []*cli.Command) {
		for _, c := range cs {
			if c.Name == "help" { // urfave's built-in
				continue
			}
			p := append(append([]string(nil), prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(io.Discard, io.Discard).Commands)
	require.GreaterOrEqual(t, len(paths), 10, "the walk found too few commands: %v", paths)
	for _, args := range paths {
		code, out, stderr := runIbgo(t, append(args, "--help")...)
		if !assert.Equal(t, 0, code, "%v: %s", args, stderr) {
			continue
		}
		assert.Contains(t, out, "USAGE:", "%v", args)
		assert.Contains(t, out, "DESCRIPTION:", "%v", args)
		assert.Regexp(t, `Examples?\b`, out, "%v", args)
		assert.Contains(t, out, "Environment", "%v", args)
	}
}
