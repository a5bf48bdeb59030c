// Package fencetest holds the checks every fenced resource and every lock
// backend runs against real servers, across real processes: the pause drill
// ([Drill]), the linearizability check ([Linearize]) and the
// read-modify-write check ([ReadModifyWrite]). A backend's tests describe it
// as a [Target] and call each; a later backend runs the same checks by
// adding a Target.
//
// Both checks re-execute the test binary as child processes, so the test
// package's TestMain must hand control to [Main]:
//
//	func TestMain(m *testing.M) { fencetest.Main(m, targets...) }
//
// lock/memlock is in-process only: its locks cannot be shared between
// processes, so it has no cross-process drill.
package fencetest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
)

// A Register is a fenced string register per key: what the checks write and
// read through a backend's guard.
type Register interface {
	// Write sets key to value if h's token is at least the highest applied
	// to key, and returns an error wrapping fence.ErrStale otherwise.
	Write(ctx context.Context, h fence.Holder, key, value string) error
	// Read returns key's value and the highest token applied to it; "" and
	// 0 for a key never written.
	Read(ctx context.Context, key string) (value string, token uint64, err error)
	// Claim raises key's token to h's and returns key's value, in one step,
	// or returns an error wrapping fence.ErrStale if key has a higher token:
	// the read of a read-modify-write. Keys are written before they are
	// claimed.
	Claim(ctx context.Context, h fence.Holder, key string) (value string, err error)
}

// A Conn is a Target opened in one process.
type Conn struct {
	Locker   lock.Locker
	Register Register
	// Close releases what Open opened; may be nil.
	Close func()
}

// A Target is a lock backend plus a fenced resource, opened the same way in
// the test process and in the child processes the checks start.
type Target struct {
	// Name identifies the target to child processes: unique within the test
	// binary, without spaces.
	Name string
	// Open connects to the target described by config (a DSN, an address,
	// table names: whatever the target needs, chosen by the test). It runs in
	// the test process and in every child.
	Open func(ctx context.Context, config string) (*Conn, error)
}

// Environment of a child process.
const (
	envRole   = "LATCHKEY_FENCETEST_ROLE"
	envTarget = "LATCHKEY_FENCETEST_TARGET"
	envConfig = "LATCHKEY_FENCETEST_CONFIG"
	envArgs   = "LATCHKEY_FENCETEST_ARGS"
)

// startChild starts a child process playing role on target with args.
func startChild(t *testing.T, target Target, config, role, args string) *suitekit.Child {
	t.Helper()
	return suitekit.StartChild(t, envRole+"="+role, envTarget+"="+target.Name, envConfig+"="+config, envArgs+"="+args)
}

// Main runs the tests, or, in a child process started by one of the checks,
// the child's part, and exits.
func Main(m *testing.M, targets ...Target) {
	role := os.Getenv(envRole)
	if role == "" {
		os.Exit(m.Run())
	}
	name := os.Getenv(envTarget)
	for _, t := range targets {
		if t.Name != name {
			continue
		}
		ctx := context.Background()
		conn, err := t.Open(ctx, os.Getenv(envConfig))
		if err != nil {
			fmt.Fprintf(os.Stderr, "fencetest child: open %s: %v\n", name, err)
			os.Exit(2)
		}
		var code int
		switch role {
		case "drill":
			code = drillChild(ctx, conn, os.Getenv(envArgs))
		case "linearize":
			code = linearizeChild(ctx, conn, os.Getenv(envArgs))
		case "rmw":
			code = rmwChild(ctx, conn, os.Getenv(envArgs))
		default:
			fmt.Fprintf(os.Stderr, "fencetest child: unknown role %q\n", role)
			code = 2
		}
		if conn.Close != nil {
			conn.Close()
		}
		os.Exit(code)
	}
	fmt.Fprintf(os.Stderr, "fencetest child: unknown target %q (not passed to fencetest.Main)\n", name)
	os.Exit(2)
}

func open(t *testing.T, target Target, config string) *Conn {
	t.Helper()
	conn, err := target.Open(t.Context(), config)
	if err != nil {
		t.Fatalf("open %s: %v", target.Name, err)
	}
	if conn.Close != nil {
		t.Cleanup(conn.Close)
	}
	return conn
}
