//go:build !linux

package demo

import "os/exec"

// dieWithParent has no kernel help outside Linux; workers still exit when
// their stdin, the pipe from the demo, closes.
func dieWithParent(*exec.Cmd) {}
