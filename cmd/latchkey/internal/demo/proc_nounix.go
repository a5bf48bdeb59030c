//go:build !unix

package demo

import (
	"errors"
	"os"
)

const (
	sigStop = 0
	sigCont = 0
)

// canPause reports whether processes can be paused and resumed here: not
// without SIGSTOP.
const canPause = false

func signalProc(*os.Process, int) error { return errors.New("pausing a process needs SIGSTOP") }
