package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCompletionCandidates: what completion offers after each start of a
// command line, as the command defines its subcommands and flags.
func TestCompletionCandidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		words     string
		want, not []string
		wantNone  bool
	}{
		{words: "", want: []string{"run", "elect", "lock", "completion", "help"}, not: []string{completeCommand, guardCommand}},
		{words: "lock", want: []string{"ls", "show", "break"}, not: []string{"--backend"}},
		{words: "lock show", want: []string{"--backend", "--json", "--rw"}, not: []string{"--yes"}},
		{words: "lock show KEY", want: []string{"--json"}},
		{words: "lock break KEY", want: []string{"--yes", "--as"}},
		{words: "lock show KEY --backend", wantNone: true}, // the flag's value comes next
		{words: "lock show KEY --json", want: []string{"--rw"}},
		{words: "elect", want: []string{"show", "observe", "--key", "--holder", "--value"}},
		{words: "elect --key K", want: []string{"--again"}, not: []string{"show"}},
		{words: "elect observe", want: []string{"--changes"}, not: []string{"--again"}},
		{words: "run", want: []string{"--key", "--permits", "--shared", "--exclusive", "--holder", "--wait"}},
		{words: "run --key K -- sh", wantNone: true},
		{words: "dedup forget", want: []string{"--store", "--yes", "--force"}},
		{words: "help", want: []string{"lock", "run"}},
		{words: "help lock", want: []string{"ls", "show", "break"}},
		{words: "completion", want: []string{"bash", "zsh", "fish"}},
		{words: "nosuch", wantNone: true},
	} {
		t.Run(tc.words, func(t *testing.T) {
			got := candidates(t.Context(), strings.Fields(tc.words))
			if tc.wantNone && len(got) > 0 {
				t.Fatalf("candidates after %q = %q, want none", tc.words, got)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("candidates after %q = %q, want %q among them", tc.words, got, w)
				}
			}
			for _, w := range tc.not {
				if slices.Contains(got, w) {
					t.Errorf("candidates after %q = %q, do not want %q", tc.words, got, w)
				}
			}
		})
	}
}

// pathWithLatchkey returns a PATH on which "latchkey" is this test binary,
// which acts as the CLI in child processes (TestMain).
func pathWithLatchkey(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "latchkey")); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// shell runs script in the named shell with latchkey on the PATH and
// returns what it printed.
func shell(t *testing.T, name, script string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is not installed (scripts/services.sh installs it): %v", name, err)
	}
	cmd := exec.Command(name, "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+pathWithLatchkey(t), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -c %q: %v\n%s", name, script, err, out)
	}
	return string(out)
}

// TestCompletionScripts loads each shell's script into the real shell and
// has it complete a command line.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	t.Run("bash", func(t *testing.T) {
		t.Parallel()
		out := shell(t, "bash", `source <(latchkey completion bash)
COMP_WORDS=(latchkey lock sh); COMP_CWORD=2; _latchkey; printf '%s\n' "${COMPREPLY[@]}"
COMP_WORDS=(latchkey lock show KEY --j); COMP_CWORD=4; _latchkey; printf '%s\n' "${COMPREPLY[@]}"`)
		if lines := strings.Fields(out); !slices.Equal(lines, []string{"show", "--json"}) {
			t.Fatalf("bash completed %q, want show, then --json", lines)
		}
	})
	t.Run("fish", func(t *testing.T) {
		t.Parallel()
		out := shell(t, "fish", `latchkey completion fish | source
complete -C 'latchkey lock sh'
complete -C 'latchkey run --ho'`)
		if lines := strings.Fields(out); !slices.Equal(lines, []string{"show", "--holder"}) {
			t.Fatalf("fish completed %q, want show, then --holder", lines)
		}
	})
	t.Run("zsh", func(t *testing.T) {
		t.Parallel()
		script := filepath.Join(t.TempDir(), "_latchkey")
		if err := os.WriteFile(script, []byte(completionScripts["zsh"]), 0o644); err != nil {
			t.Fatal(err)
		}
		shell(t, "zsh", "zsh -n "+script) // parses
		// Loaded as compinit loads it, the function asks latchkey; its
		// compadd is stood in for, as zsh runs compadd only inside a
		// completion widget.
		out := shell(t, "zsh", `autoload -U compinit; compinit -u
source `+script+`
compadd() { shift; print -l -- "$@" }
words=(latchkey lock sh); CURRENT=3; _latchkey`)
		if lines := strings.Fields(out); !slices.Equal(lines, []string{"ls", "show", "break"}) {
			t.Fatalf("zsh offered %q, want ls, show and break (compadd filters by prefix)", lines)
		}
	})
}

// TestHelpSubcommand: "latchkey help lock show" is "latchkey lock show -h".
func TestHelpSubcommand(t *testing.T) {
	t.Parallel()
	code, out, _ := latchkey(t, "help", "lock", "show")
	_, want, _ := latchkey(t, "lock", "show", "-h")
	if code != exitOK || out != want || !strings.Contains(out, "--rw") {
		t.Fatalf("help lock show: exit %d, %q; want lock show -h's %q", code, out, want)
	}
	if code, _, errb := latchkey(t, "help", "lock", "nosuch"); code != exitUsage || !strings.Contains(errb, "ls, show, break") {
		t.Fatalf("help lock nosuch: exit %d, %q; want %d naming the subcommands", code, errb, exitUsage)
	}
	if code, _, _ := latchkey(t, "completion", "tcsh"); code != exitUsage {
		t.Fatalf("completion tcsh: exit %d, want %d", code, exitUsage)
	}
}
