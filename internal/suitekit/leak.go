package suitekit

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Goroutines returns the stacks of goroutines running latchkey code, other
// than test functions and this package's own: taken before a test and
// compared after it (WaitNoMore), they tell whether a backend left
// goroutines running.
func Goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/latchkey-go/latchkey/") &&
			!strings.Contains(g, "testing.tRunner") &&
			!strings.Contains(g, "suitekit.Goroutines") {
			out = append(out, g)
		}
	}
	return out
}

// WaitNoMore waits up to within for no more latchkey goroutines to run
// than before (from Goroutines), and fails t with their stacks if more
// still do.
func WaitNoMore(t testing.TB, before []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		after := Goroutines()
		if len(after) <= len(before) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d latchkey goroutines before, %d after:\n%s",
				len(before), len(after), strings.Join(after, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
