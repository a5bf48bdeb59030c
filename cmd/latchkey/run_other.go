//go:build !unix

package main

import (
	"os"
	"os/exec"
)

var forwarded = []os.Signal{os.Interrupt}

func ownProcessGroup(*exec.Cmd) {}

func signalGroup(p *os.Process, sig os.Signal) { _ = p.Signal(sig) }
