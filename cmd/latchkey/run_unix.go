//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// forwarded are the signals "latchkey run" passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// A child is the command "latchkey run" or "latchkey elect" supervises.
//
// It is not started directly: latchkey starts itself as the command's guard
// ("latchkey command-guard"), in a process group of its own, and the guard
// starts the command in that group. The guard holds the read end of a pipe
// whose only write end is latchkey's; when latchkey dies, even of SIGKILL,
// the kernel closes that end, the guard reads EOF and kills the whole group
// with SIGKILL: the command and everything it started, which would otherwise
// run on beside the next holder of the lock. A signal for the command goes
// to the group; the guard ignores it and exits with the command's status.
type child struct {
	cmd      *exec.Cmd
	lifeline *os.File // the pipe's write end; closed by latchkey's death
}

// startChild starts argv, with env added to latchkey's environment, under a
// guard; who names latchkey's command in the guard's messages. A command
// that cannot be started is reported by the guard, which exits 127.
func startChild(argv, env []string, who string) (*child, error) {
	self, err := selfExecutable()
	if err != nil {
		return nil, fmt.Errorf("find latchkey's own executable to guard the command: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close() // the guard has its own copy
	cmd := exec.Command(self, append([]string{guardCommand, who, "--"}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = []*os.File{r} // fd 3 in the guard
	// A process group of its own, so a signal reaches the command and
	// everything it started (a shell script's children), not only its first
	// process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &child{cmd: cmd, lifeline: w}, nil
}

// wait waits for the guard, and so the command, to end.
func (c *child) wait() error {
	err := c.cmd.Wait()
	c.lifeline.Close()
	return err
}

// signal sends sig to the command's process group.
func (c *child) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		if syscall.Kill(-c.cmd.Process.Pid, s) == nil {
			return
		}
	}
	_ = c.cmd.Process.Signal(sig)
}
