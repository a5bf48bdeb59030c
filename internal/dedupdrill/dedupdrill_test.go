package dedupdrill

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m, sleeper) }

// sleeper says its argument and waits to be killed.
var sleeper = Role{Name: "sleeper", Run: func(_ context.Context, arg string) error {
	Say("ready %s", arg)
	time.Sleep(time.Hour)
	return errors.New("woke up")
}}

// A child re-executed as a role talks to the parent through Expect and dies
// of Kill's SIGKILL.
func TestChildSaysAndIsKilled(t *testing.T) {
	t.Parallel()
	c := StartChild(t, sleeper.Name, "pay-1")
	if got := c.Expect(t, "ready", 30*time.Second); got != "pay-1" {
		t.Fatalf("child said ready %q, want pay-1", got)
	}
	c.Kill(t)
}

func TestParallel(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan int, 3)
	err := Parallel(ctx, 3, func(ctx context.Context, i int) error {
		seen <- i
		if i == 1 {
			cancel()
			return boom
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Parallel = %v, want the one error that is not the context's", err)
	}
	close(seen)
	sum := 0
	for i := range seen {
		sum += i
	}
	if sum != 0+1+2 {
		t.Fatalf("runs saw indexes summing to %d, want 0, 1 and 2", sum)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := Parallel(ctx, 2, func(ctx context.Context, _ int) error { return ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Parallel after cancel = %v, want context.Canceled", err)
	}
}
