//go:build unix && !linux

package main

import (
	"os"
	"os/exec"
)

// killWithParent does nothing here: without a parent-death signal, a guard
// killed outright leaves its command running. The guard's own watch of
// latchkey (its lifeline) still holds.
func killWithParent(*exec.Cmd) {}

func selfExecutable() (string, error) { return os.Executable() }
