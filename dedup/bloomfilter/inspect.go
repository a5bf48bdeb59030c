package bloomfilter

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/dedup"
)

var _ dedup.Inspector = (*Filter)(nil)

// Lookup implements dedup.Inspector with what a Bloom filter can say: an id
// it may have seen is a Mark with State Done and Approximate set, with the
// current generation's fill ratio and the false-positive rate now (the
// chance that "maybe seen" is wrong); an id it has certainly not seen is
// dedup.ErrNotFound. It costs two round trips (the test, then Stats) and
// changes nothing; claims of a Lossy store in progress are not reported.
func (f *Filter) Lookup(ctx context.Context, id string) (dedup.Mark, error) {
	if err := dedup.CheckID(id); err != nil {
		return dedup.Mark{}, err
	}
	seen, err := f.Test(ctx, id)
	if err != nil {
		return dedup.Mark{}, err
	}
	if !seen {
		return dedup.Mark{}, fmt.Errorf("%w: the filter has not seen it", dedup.ErrNotFound)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		return dedup.Mark{}, err
	}
	return dedup.Mark{State: dedup.Done, Approximate: true, FillRatio: st.Current.FillRatio, FalsePositiveRate: st.FalsePositiveRate}, nil
}

// Forget implements dedup.Inspector by refusing: it returns an error
// wrapping dedup.ErrCannotForget for a valid id (dedup.ErrInvalidID for a
// bad one) and changes nothing. An id's bits are shared with other ids, so
// clearing them would forget those too; the id ages out with its
// generation, at most two periods after it was added.
func (f *Filter) Forget(_ context.Context, id string, _ bool) error {
	if err := dedup.CheckID(id); err != nil {
		return err
	}
	return fmt.Errorf("%w: a Bloom filter's bits are shared by many ids, and clearing them would forget others too; "+
		"the id ages out at most %v (two periods) after it was added", dedup.ErrCannotForget, 2*f.Period())
}
