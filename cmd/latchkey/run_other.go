//go:build !unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
)

var forwarded = []os.Signal{os.Interrupt}

// A child is the command "latchkey run" or "latchkey elect" supervises. On
// systems other than Unix it is started directly, and it does not die with
// latchkey: a latchkey killed outright leaves its command running, and only
// the fencing token guards what it writes.
type child struct{ cmd *exec.Cmd }

func startChild(argv, env []string, _ string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd}, nil
}

func (c *child) wait() error { return c.cmd.Wait() }

func (c *child) signal(sig os.Signal) { _ = c.cmd.Process.Signal(sig) }

func guardCmd(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "latchkey: command-guard runs only on Unix")
	return exitUsage
}
