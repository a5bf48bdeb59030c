// Command latchkey runs latchkey's demonstrations and tools. See
// "latchkey help".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchkey-go/latchkey/cmd/latchkey/internal/demo"
)

// Exit statuses, of every command. A command run by "latchkey run" adds its
// own, and 128+N when it dies of signal N, as a shell reports them.
const (
	exitOK          = 0
	exitFail        = 1   // a guarded scenario was damaged, or the command failed
	exitUsage       = 2   // bad flags, arguments or configuration: nothing was started
	exitUnavailable = 69  // a lock backend or a store could not be opened, or an address bound
	exitNotAcquired = 75  // run: the lock is held elsewhere (try-once or wait limit)
	exitLeaseLost   = 76  // run: the lease was lost while the command ran; it was stopped
	exitNoCommand   = 127 // run: the command could not be started, as a shell reports it
	exitInterrupted = 130 // Ctrl-C, as a shell reports it
)

// commands are latchkey's commands, in the order the help lists them. A
// command is one entry: its name, its line in the help (none: hidden) and
// the function that runs it and returns its exit status.
func commands() []command {
	return []command{
		{"demo", "run the classic duplicate failures for real, unguarded and guarded", demoCmd},
		{"run", "run a command while holding a distributed lock (cron on many hosts)", runCmd},
		{"elect", "run a command only while elected leader; show or observe who leads", electCmd},
		{"gateway", "an idempotency reverse proxy in front of any HTTP service", gatewayCmd},
		{"lock", "list, show or break the distributed locks on a backend", lockCmd},
		{"semaphore", "show the holders of a semaphore's permits on a backend", semaphoreCmd},
		{"idem", "show or forget the idempotency record of a request", idemCmd},
		{"dedup", "show or forget the processed mark of a message id", dedupCmd},
		{"version", "print the version", versionCmd},
		{"help", "show this help", helpCmd},
		{demo.WorkerCommand, "", workerCmd}, // the demo's child processes
		{guardCommand, "", guardCmd},        // run's and elect's commands' guard
	}
}

func main() { os.Exit(cliMain(os.Args[1:])) }

// cliMain is main without the exit, so tests can run the real command in a
// child process. Ctrl-C and SIGTERM cancel the context: every command then
// stops its child processes, removes its temporary files and returns.
func cliMain(args []string) int {
	quietClients()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}
