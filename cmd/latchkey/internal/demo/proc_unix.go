//go:build unix

package demo

import (
	"os"
	"syscall"
)

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// canPause reports whether processes can be paused and resumed here.
const canPause = true

func signalProc(p *os.Process, sig syscall.Signal) error { return p.Signal(sig) }
