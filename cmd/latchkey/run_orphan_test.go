//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // not Linux: kill(0) is all there is
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// fileProc starts "latchkey command args..." in dir as cliProc does, with its
// output in a file of dir, whose path it returns: an orphan keeps a pipe
// open, and a file lets the test wait for latchkey alone.
func fileProc(t *testing.T, dir, command string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	f, err := os.CreateTemp(dir, command+"-*.out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], append([]string{command}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd, f.Name()
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestCommandDiesWithLatchkey: a "latchkey run" or "latchkey elect" killed
// with SIGKILL cannot stop its command, so without help the command — a
// nightly job, say — runs on, reparented to init, beside the next holder,
// both writing. The command and what it started must die with latchkey:
// here the shell and a background child it forked are gone before the next
// holder's command starts, and, in practice, within milliseconds.
func TestCommandDiesWithLatchkey(t *testing.T) {
	modes := []struct {
		name       string
		command    string
		args, next []string // the killed run's mode, and the next holder's
	}{
		{"run", "run", nil, nil},
		{"run --permits", "run", []string{"--permits", "1"}, []string{"--permits", "1"}},
		{"run --shared", "run", []string{"--shared"}, []string{"--exclusive"}},
		{"run --exclusive", "run", []string{"--exclusive"}, []string{"--exclusive"}},
		{"elect", "elect", nil, nil},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			job := func(tag string) []string {
				// The shell writes its own pid and its background child's,
				// then waits: the job and a process it started.
				return []string{"sh", "-c", `sleep 60 & echo $! > ` + tag + `.child; echo $$ > ` + tag + `.pid; wait`}
			}
			args := func(tag string, mode []string) []string {
				a := append([]string{"--key", "k", "--ttl", "2s", "--backend", sqliteURL(dir)}, mode...)
				return append(append(a, "--"), job(tag)...)
			}
			first, out := fileProc(t, dir, m.command, args("first", m.args)...)
			shell, child := readPid(t, filepath.Join(dir, "first.pid")), readPid(t, filepath.Join(dir, "first.child"))

			next, nextOut := fileProc(t, dir, m.command, args("next", m.next)...)
			killed := time.Now()
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_, _ = first.Process.Wait()
			t.Cleanup(func() { // on failure, leave no orphan behind
				_ = syscall.Kill(shell, syscall.SIGKILL)
				_ = syscall.Kill(child, syscall.SIGKILL)
			})
			nextPid := filepath.Join(dir, "next.pid")
			for alive(shell) || alive(child) {
				if _, err := os.Stat(nextPid); err == nil {
					t.Fatalf("the killed latchkey's command (shell alive %v, its child %v) runs beside the next holder's\n%s\n%s",
						alive(shell), alive(child), readFile(out), readFile(nextOut))
				}
				time.Sleep(time.Millisecond)
			}
			gone := time.Since(killed)
			readPid(t, nextPid)
			t.Logf("the command and its child ended %v after latchkey's SIGKILL", gone.Round(time.Millisecond))
			_ = next.Process.Signal(syscall.SIGTERM)
			_, _ = next.Process.Wait()
		})
	}
}
