package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/latchkey-go/latchkey/cmd/latchkey/internal/gateway"
	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/otlpenv"
)

// gatewayCmd is "latchkey gateway": the flags and the file make a Config,
// and the gateway serves until ctx ends.
func gatewayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	cl := gateway.Flags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latchkey gateway: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := cl.Config()
	if err != nil {
		fmt.Fprintf(stderr, "latchkey gateway: %v\n", err)
		return exitUsage
	}
	err = gateway.Serve(ctx, cfg, stderr)
	if err == nil {
		return exitOK
	}
	// A bad store URL or OTEL_* value is a usage error.
	return usageOrUnavailable("latchkey gateway", err, stderr, idem.ErrInvalid, otlpenv.ErrInvalid)
}
