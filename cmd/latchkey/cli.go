package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFail        = 1 // a guarded scenario was damaged, or the command failed
	exitUsage       = 2
	exitInterrupted = 130 // Ctrl-C, as a shell reports it
)

// version is set at release time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version and VCS revision of the build are shown.
var version = ""

type command struct {
	name    string
	summary string // empty: hidden from help
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"demo", "run the seeds' experiments for real and explain what happened", demoCmd},
		{"run", "run a command while holding a distributed lock (cron on many hosts)", runCmd},
		{"gateway", "an idempotency reverse proxy in front of any HTTP service", gatewayCmd},
		{"idem", "show or forget the idempotency record of a request", idemCmd},
		{"dedup", "show or forget the processed mark of a message id", dedupCmd},
		{"version", "print the version", versionCmd},
		{"help", "show this help", helpCmd},
		{workerCommand, "", workerCmd}, // the demo's child processes
	}
}

// run dispatches args to a command and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" {
		name = "help"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "latchkey: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `latchkey keeps money from being charged twice: distributed locks with
fencing tokens, idempotency and deduplication.

Usage:

	latchkey <command> [flags]

Commands:

`)
	for _, c := range commands() {
		if c.summary != "" {
			fmt.Fprintf(w, "\t%-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, `
Run "latchkey <command> -h" for a command's flags.
`)
}

func helpCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		for _, c := range commands() {
			if c.name == args[0] && c.summary != "" {
				return c.run(context.Background(), []string{"-h"}, stdout, stdout)
			}
		}
		fmt.Fprintf(stderr, "latchkey help: unknown command %q\n", args[0])
		return exitUsage
	}
	usage(stdout)
	return exitOK
}

func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: latchkey version")
		return exitUsage
	}
	fmt.Fprintln(stdout, versionString())
	return exitOK
}

func versionString() string {
	v, rev, dirty := version, "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
				if len(rev) > 12 {
					rev = rev[:12]
				}
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return fmt.Sprintf("latchkey %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
