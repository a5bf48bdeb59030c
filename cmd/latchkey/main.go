// Command latchkey runs latchkey's demonstrations and tools. See
// "latchkey help".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(cliMain(os.Args[1:])) }

// cliMain is main without the exit, so tests can run the real command in a
// child process. Ctrl-C and SIGTERM cancel the context: every command then
// stops its child processes, removes its temporary files and returns.
func cliMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}
