package finish

import (
	"context"
	"errors"
	"testing"
)

var errFinal = errors.New("final")

func isFinal(err error) bool { return errors.Is(err, errFinal) }

func TestRetry(t *testing.T) {
	blip := errors.New("blip")
	for _, c := range []struct {
		name  string
		errs  []error // what each call returns; nil once they run out
		calls int
		want  error
	}{
		{"at once", nil, 1, nil},
		{"after one blip", []error{blip}, 2, nil},
		{"after two blips", []error{blip, blip}, 3, nil},
		{"down", []error{blip, blip, blip, blip}, Attempts, blip},
		{"final", []error{errFinal}, 1, errFinal},
		{"final after a blip", []error{blip, errFinal}, 2, errFinal},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := Retry(context.Background(), func(context.Context) error {
				calls++
				if calls <= len(c.errs) {
					return c.errs[calls-1]
				}
				return nil
			}, isFinal)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) || calls != c.calls {
				t.Errorf("Retry = %v after %d calls, want %v after %d", err, calls, c.want, c.calls)
			}
		})
	}
}

func TestRetryStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	blip := errors.New("blip")
	calls := 0
	err := Retry(ctx, func(context.Context) error { calls++; cancel(); return blip }, isFinal)
	if calls != 1 || !errors.Is(err, blip) || !errors.Is(err, context.Canceled) {
		t.Errorf("Retry = %v after %d calls, want the blip and the cancellation after 1", err, calls)
	}
}

func TestDetached(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, stop := Detached(ctx)
	defer stop()
	if d.Err() != nil {
		t.Fatalf("detached context is done: %v", d.Err())
	}
	if _, ok := d.Deadline(); !ok {
		t.Error("detached context has no deadline")
	}
}
