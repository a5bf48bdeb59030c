package fence_test

import (
	"errors"
	"math"
	"testing"

	"github.com/latchkey-go/latchkey/fence"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		highest uint64
		h       fence.Holder
		want    error
	}{
		{0, fence.Token(1), nil},
		{5, fence.Token(5), nil}, // the same holder writes again
		{5, fence.Token(6), nil},
		{5, fence.Token(4), fence.ErrStale},
		{math.MaxInt64, fence.Token(math.MaxInt64 - 1), fence.ErrStale},
		{0, nil, fence.ErrInvalid},
		{0, fence.Token(0), fence.ErrInvalid},
		{0, fence.Token(math.MaxInt64 + 1), fence.ErrInvalid},
	} {
		err := fence.Check(c.highest, c.h)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("Check(%d, %v) = %v, want %v", c.highest, c.h, err, c.want)
		}
	}
}
