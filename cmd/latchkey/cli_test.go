package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestHelpToStdout asks every command for its help, the way a user pipes it
// into less: the text goes to stdout, nothing to stderr, and the status is 0.
func TestHelpToStdout(t *testing.T) {
	for _, c := range commands() {
		if c.summary == "" {
			continue
		}
		for _, h := range []string{"-h", "-help", "--help"} {
			t.Run(c.name+" "+h, func(t *testing.T) {
				code, out, errOut := latchkey(t, c.name, h)
				if code != exitOK {
					t.Errorf("exit %d, want %d", code, exitOK)
				}
				if !strings.Contains(strings.ToLower(out), "usage") {
					t.Errorf("no usage on stdout:\n%s", out)
				}
				if errOut != "" {
					t.Errorf("stderr not empty:\n%s", errOut)
				}
			})
		}
	}
}

// TestHelpOnBadFlag keeps the other half: a flag mistake is an error, on
// stderr, with status 2, so a script that gets it wrong notices.
func TestHelpOnBadFlag(t *testing.T) {
	for _, name := range []string{"demo", "run", "gateway"} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := latchkey(t, name, "--bogus")
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout not empty:\n%s", out)
			}
			if !strings.Contains(errOut, "flag provided but not defined: -bogus") {
				t.Errorf("stderr:\n%s", errOut)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := latchkey(t, args...)
			if code != exitOK || errOut != "" {
				t.Errorf("exit %d, stderr %q", code, errOut)
			}
			if !strings.HasPrefix(out, "latchkey ") || !strings.Contains(out, runtime.Version()) {
				t.Errorf("stdout %q, want latchkey's version and the Go version", out)
			}
		})
	}
}
