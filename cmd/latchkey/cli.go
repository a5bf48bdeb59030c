package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// version is set at release time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version and VCS revision of the build are shown.
var version = ""

// A command is one of latchkey's commands (see commands).
type command struct {
	name    string
	summary string // empty: hidden from help
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	subs    []string // its subcommands, if any
	alone   bool     // with subs: it also runs without one (elect)
}

// run dispatches args to a command and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
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

// helpCmd is "latchkey help [COMMAND [SUBCOMMAND]]": the command's help, as
// "latchkey COMMAND [SUBCOMMAND] -h" prints it, on stdout.
func helpCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelpFlag(args[0]) {
		usage(stdout)
		return exitOK
	}
	c := findCommand(args[0])
	switch {
	case c == nil || c.summary == "":
		fmt.Fprintf(stderr, "latchkey help: unknown command %q\n", args[0])
		return exitUsage
	case len(args) == 1:
		return c.run(context.Background(), []string{"-h"}, stdout, stderr)
	case len(args) == 2 && slices.Contains(c.subs, args[1]):
		return c.run(context.Background(), []string{args[1], "-h"}, stdout, stderr)
	case len(c.subs) == 0:
		fmt.Fprintf(stderr, "latchkey help: %s has no subcommands\n", c.name)
	default:
		fmt.Fprintf(stderr, "latchkey help: %s's subcommands are %s; got %q\n", c.name, strings.Join(c.subs, ", "), args[1:])
	}
	return exitUsage
}

// usageOrUnavailable reports err for the command name and returns the exit
// status: 2 when err is one of usage (a bad URL or input: nothing was
// sent), 69 otherwise (the backend or store could not be reached).
func usageOrUnavailable(name string, err error, stderr io.Writer, usage ...error) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	for _, u := range usage {
		if errors.Is(err, u) {
			return exitUsage
		}
	}
	return exitUnavailable
}

func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// topHelp answers a command with subcommands that is called bare or with a
// help flag first: fs's usage on stderr with status 2 when bare, on stdout
// with status 0 when asked for. done is false when args name a subcommand.
func topHelp(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) > 0 && !isHelpFlag(args[0]) {
		return 0, false
	}
	w, code := stderr, exitUsage
	if len(args) > 0 {
		w, code = stdout, exitOK
	}
	fs.SetOutput(w)
	fs.Usage()
	return code, true
}

// parseFlags parses a command's flags, the same way for every command. Help
// that was asked for (-h, -help, --help) goes to stdout with status 0, like
// "latchkey -h"; a flag mistake and the usage after it go to stderr with
// status 2. When ok is false the command returns code at once. The usage is
// whatever fs.Usage writes to fs.Output().
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if code, ok := parseOnly(fs, args, stdout, stderr); !ok {
		return code, false
	}
	return settled(fs, stderr)
}

// settled resolves the backend flags after parsing (backend_flag.go).
func settled(fs *flag.FlagSet, stderr io.Writer) (code int, ok bool) {
	if err := settleBackend(fs, stderr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), strings.TrimPrefix(err.Error(), errBackendFlags.Error()+": "))
		return exitUsage, false
	}
	return exitOK, true
}

// parseOnly is parseFlags without settling the backend flags.
func parseOnly(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if c, ok := stdout.(*flagCollector); ok { // completion asks for the flags (completion.go)
		c.fs = fs
		return exitOK, false
	}
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		_, _ = out.WriteTo(stdout)
		return exitOK, false
	default:
		_, _ = out.WriteTo(stderr)
		return exitUsage, false
	}
}

// parseNamed is parseFlags for a subcommand that takes names (lock show
// KEY, semaphore show NAME): flags may stand before or after the names,
// "latchkey lock show KEY --json" as "latchkey lock show --json KEY"; a
// "--" ends the flags. It returns the names in their order.
func parseNamed(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (names []string, code int, ok bool) {
	for {
		if code, ok := parseOnly(fs, args, stdout, stderr); !ok {
			return nil, code, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			code, ok := settled(fs, stderr)
			return append(names, rest...), code, ok
		}
		if len(rest) == 0 {
			code, ok := settled(fs, stderr)
			return names, code, ok
		}
		names, args = append(names, rest[0]), rest[1:]
	}
}

func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: latchkey version

Prints latchkey's version (the module version, or "(devel)" for a build from
a checkout, and the VCS revision it was built from), the Go version, and the
platform. "latchkey --version" is the same.
`)
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fs.Usage()
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
