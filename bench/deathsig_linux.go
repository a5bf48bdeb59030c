package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills a started server if this process dies without
// stopping it (os.Exit on an error, a signal).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
