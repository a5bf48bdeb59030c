package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/latchkey-go/latchkey/cmd/latchkey/internal/demo"
)

// demoCmd is "latchkey demo": the report goes to stdout, as text while the
// scenarios play or as one JSON document at the end.
func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	cl := demo.Flags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latchkey demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	var page *os.File
	if cl.HTML != "" { // created first, so a path that cannot be written fails before the run
		f, err := os.Create(cl.HTML)
		if err != nil {
			fmt.Fprintf(stderr, "latchkey demo: --html: %v\n", err)
			return exitUsage
		}
		page = f
	}
	var progress io.Writer
	if !cl.JSON {
		progress = stdout
	}
	rep, err := demo.Run(ctx, cl.Options(), progress)
	if err == nil && cl.JSON {
		err = rep.WriteJSON(stdout)
	}
	if page != nil {
		if err = writePage(page, rep, err); err == nil {
			fmt.Fprintf(stderr, "latchkey demo: the report as pictures: %s\n", cl.HTML)
		}
	}
	switch {
	case errors.Is(err, demo.ErrUnknownScenario):
		fmt.Fprintf(stderr, "latchkey demo: %v\n", err)
		return exitUsage
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(stderr, "latchkey demo: interrupted; workers stopped, temporary files removed")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "latchkey demo: %v\n", err)
		return exitFail
	case !rep.OK:
		return exitFail
	}
	return exitOK
}

// writePage writes the HTML report to f and closes it; after a run that
// failed (err) it removes the file instead, so no half-page is left.
func writePage(f *os.File, rep *demo.Report, err error) error {
	if err == nil {
		err = rep.WriteHTML(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// workerCmd is one of the demo's workers, a child process of the demo.
func workerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch err := demo.Worker(ctx, args, os.Stdin, stdout, stderr); {
	case errors.Is(err, demo.ErrWorkerUsage):
		return exitUsage
	case err != nil:
		return exitFail
	}
	return exitOK
}
