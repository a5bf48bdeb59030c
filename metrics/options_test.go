package metrics

import (
	"errors"
	"math"
	"testing"
)

func TestBadBuckets(t *testing.T) {
	for _, b := range [][]float64{nil, {1, 1}, {2, 1}, {0, 1}, {1, math.Inf(1)}, {math.NaN()}} {
		if _, err := NewLock(WithBuckets(b)); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewLock(WithBuckets(%v)): %v, want ErrInvalid", b, err)
		}
		if _, err := NewIdem(WithBuckets(b)); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewIdem(WithBuckets(%v)): %v, want ErrInvalid", b, err)
		}
		if _, err := NewDedup(WithBuckets(b)); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewDedup(WithBuckets(%v)): %v, want ErrInvalid", b, err)
		}
	}
	m, err := NewLock(WithBuckets([]float64{0.01, 0.1, 1}), WithConstLabels(map[string]string{"service": "payments"}))
	if err != nil {
		t.Fatal(err)
	}
	m.Observer("redis")
	lint(t, m)
}
