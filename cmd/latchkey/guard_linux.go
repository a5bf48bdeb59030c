package main

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel send cmd SIGKILL when the thread that
// starts it ends, which for the guard is when the guard dies.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// selfExecutable is the running binary, even if its file was replaced since
// it started (an upgrade during a long run).
func selfExecutable() (string, error) { return "/proc/self/exe", nil }
