package testsvc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// atOnceEnv carries, to a copy of the test binary that RunAtOnce starts,
// the test's argument and the moment to start at.
const atOnceEnv = "LATCHKEY_TEST_AT_ONCE"

// RunAtOnce starts n copies of this test binary running only the test
// named test, which all begin their work at one moment 300 ms on, and
// fails t for each copy that exits with an error, with its output. In the
// copies, [AtOnceChild] returns arg. Races between processes (a new file
// opened by many at once) need this: goroutines of one process share too
// much to lose them.
func RunAtOnce(t *testing.T, test, arg string, n int) {
	t.Helper()
	at := strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixNano(), 10)
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+test+"$")
		cmds[i].Env = append(os.Environ(), atOnceEnv+"="+at+" "+arg)
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d of %d: %v: %s", i+1, n, err, outs[i])
		}
	}
}

// AtOnceChild reports whether this process is a copy RunAtOnce started
// and, if so, waits for the common moment and returns its argument. The
// test then does its work and ends with [ExitAtOnce].
func AtOnceChild() (arg string, ok bool) {
	at, arg, ok := strings.Cut(os.Getenv(atOnceEnv), " ")
	if !ok {
		return "", false
	}
	ns, _ := strconv.ParseInt(at, 10, 64)
	time.Sleep(time.Until(time.Unix(0, ns)))
	return arg, true
}

// ExitAtOnce ends a copy RunAtOnce started: status 0 if err is nil, and 1
// with err on stderr otherwise.
func ExitAtOnce(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
