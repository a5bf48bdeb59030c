//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

// guardCmd is "latchkey command-guard WHO -- command [args...]", started by
// startChild with the read end of latchkey's lifeline as fd 3. It exits with
// the command's status (128+N if it died of signal N), 127 if it could not
// start it, and takes its process group, itself included, down with SIGKILL
// as soon as latchkey is gone.
func guardCmd(_ context.Context, args []string, _, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(stderr, "latchkey command-guard: started by latchkey run and elect, not by hand")
		return exitUsage
	}
	who, argv := args[0], args[2:]
	lifeline := os.NewFile(3, "lifeline")
	if lifeline == nil {
		fmt.Fprintf(stderr, "%s: command-guard: no lifeline on fd 3\n", who)
		return exitUsage
	}
	// Signals for the command reach the whole group, the guard included;
	// they are the command's to act on, and the guard waits for its end.
	signal.Notify(make(chan os.Signal, 1), forwarded...)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The death signal (Linux) follows the thread that started the command:
	// this one, held until the command ends, so the command also dies if the
	// guard itself is killed.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitNoCommand
	}
	go func() {
		// Nothing is ever written: the read returns when latchkey's end is
		// closed, which its exit or death does.
		_, _ = io.Copy(io.Discard, lifeline)
		_ = syscall.Kill(0, syscall.SIGKILL)
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "%s: %v\n", who, err)
	return exitFail
}
