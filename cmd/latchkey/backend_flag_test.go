package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// A nightly job runs for hours: a password in its --backend argument is in
// the process list all that time. The URL can come from a file, and the
// password from a file or the environment; a password given as an argument
// still works, with a warning; no message ever shows it.
func TestBackendPasswordOffTheCommandLine(t *testing.T) {
	const secret = "n1ghtly-s3cret"
	srv := testsvc.StartRedis(t, "--requirepass", secret)
	plain := "redis://" + srv.Addr()
	full := "redis://:" + secret + "@" + srv.Addr()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	urlFile := write("backend", full+"\n")
	pwFile := write("password", secret+"\n")
	wrongFile := write("wrong", "guess")
	emptyFile := write("empty", "\n")

	for _, tc := range []struct {
		name     string
		env      string // $LATCHKEY_BACKEND_PASSWORD
		args     []string
		code     int
		warns    bool
		stderrIs string
	}{
		{name: "the URL in a file", args: []string{"--backend-file", urlFile}, code: exitOK},
		{name: "the password in a file", args: []string{"--backend", plain, "--password-file", pwFile}, code: exitOK},
		{name: "the password in the environment", env: secret, args: []string{"--backend", plain}, code: exitOK},
		{name: "the password as an argument", args: []string{"--backend", full}, code: exitOK, warns: true},
		{name: "a wrong password", args: []string{"--backend", plain, "--password-file", wrongFile}, code: exitUnavailable, stderrIs: "WRONGPASS"},
		{name: "no password", args: []string{"--backend", plain}, code: exitUnavailable, stderrIs: "NOAUTH"},
		{name: "two URLs", args: []string{"--backend", plain, "--backend-file", urlFile}, code: exitUsage, stderrIs: "not both"},
		{name: "two passwords", args: []string{"--backend-file", urlFile, "--password-file", pwFile}, code: exitUsage, stderrIs: "so does --password-file"},
		{name: "an empty file", args: []string{"--backend-file", emptyFile}, code: exitUsage, stderrIs: "first line is empty"},
		{name: "a missing file", args: []string{"--backend-file", filepath.Join(dir, "nope")}, code: exitUsage, stderrIs: "no such file"},
		{name: "a password for SQLite", args: []string{"--backend", "sqlite://" + filepath.Join(dir, "x.db"), "--password-file", pwFile},
			code: exitUsage, stderrIs: "takes none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envBackendPassword, tc.env)
			code, out, errOut := latchkey(t, append([]string{"lock", "ls", "--prefix", "nightly-"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit status %d, want %d; stderr:\n%s\nstdout:\n%s", code, tc.code, errOut, out)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("the output shows the password:\n%s%s", out, errOut)
			}
			if got := strings.Contains(errOut, "warning: the password in --backend"); got != tc.warns {
				t.Errorf("warned: %v, want %v; stderr:\n%s", got, tc.warns, errOut)
			}
			if !strings.Contains(errOut, tc.stderrIs) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderrIs, errOut)
			}
		})
	}
}
