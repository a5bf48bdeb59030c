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
		{name: "demo", summary: "run the classic duplicate failures for real, unguarded and guarded", run: demoCmd},
		{name: "run", summary: "run a command while holding a distributed lock (cron on many hosts)", run: runCmd},
		{name: "elect", summary: "run a command only while elected leader; show or observe who leads", run: electCmd,
			subs: []string{"show", "observe"}, alone: true},
		{name: "gateway", summary: "an idempotency reverse proxy in front of any HTTP service", run: gatewayCmd},
		{name: "lock", summary: "list, show or break the distributed locks on a backend", run: lockCmd,
			subs: []string{"ls", "show", "break"}},
		{name: "semaphore", summary: "show the holders of a semaphore's permits on a backend", run: semaphoreCmd,
			subs: []string{"show"}},
		{name: "idem", summary: "show or forget the idempotency record of a request", run: idemCmd,
			subs: []string{"show", "forget"}},
		{name: "dedup", summary: "show or forget the processed mark of a message id", run: dedupCmd,
			subs: []string{"show", "forget"}},
		{name: "outbox", summary: "show a transactional outbox: pending messages, lag, the relay's term", run: outboxCmd,
			subs: []string{"show"}},
		{name: "completion", summary: "print a shell completion script: bash, zsh or fish", run: completionCmd,
			subs: []string{"bash", "zsh", "fish"}},
		{name: "version", summary: "print the version", run: versionCmd},
		{name: "help", summary: "show this help, or a command's: help COMMAND [SUBCOMMAND]", run: helpCmd},
		{name: demo.WorkerCommand, run: workerCmd}, // the demo's child processes
		{name: guardCommand, run: guardCmd},        // run's and elect's commands' guard
		{name: completeCommand, run: completeCmd},  // the completion scripts' question
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
