//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwarded are the signals "latchkey run" passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// ownProcessGroup puts the command in a process group of its own, so a
// signal reaches the command and everything it started (a shell script's
// children), not only its first process.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to p's process group.
func signalGroup(p *os.Process, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		if syscall.Kill(-p.Pid, s) == nil {
			return
		}
	}
	_ = p.Signal(sig)
}
