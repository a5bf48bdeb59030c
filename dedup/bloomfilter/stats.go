package bloomfilter

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Stats is a snapshot of a filter, read in one step, for a metrics collector
// (publish FillRatio and FalsePositiveRate and alert well before the rate
// passes Sizing.Rate: that means the capacity is too small for the traffic
// of one period).
type Stats struct {
	// Generation counts rotations since the filter was created (or last
	// expired while idle).
	Generation int64
	// Started is when the current generation began, on Redis's clock; the
	// zero time when the filter does not exist.
	Started time.Time
	// Added is the number of ids added to the current generation; it
	// rotates when this reaches Sizing.Capacity.
	Added int64
	// Current and Previous describe the two live generations; a generation
	// past its window reads as empty.
	Current, Previous GenerationStats
	// FalsePositiveRate is the chance that a never-added id is reported
	// seen now, estimated from the fill of both generations.
	FalsePositiveRate float64
}

// GenerationStats describes one generation's bitmap.
type GenerationStats struct {
	// BitsSet is the number of bits set, of Sizing.Bits.
	BitsSet int64
	// FillRatio is BitsSet / Sizing.Bits; about 0.5 at capacity with the
	// optimal k.
	FillRatio float64
	// EstimatedCount is the number of distinct ids the bitmap holds,
	// estimated from its fill: -(m/k) ln(1 - X/m) (Swamidass and Baldi).
	EstimatedCount float64
}

// Stats reads the filter's state and counts the bits of both generations
// (BITCOUNT: O(m), about 0.1 ms per million bits, on the server).
func (f *Filter) Stats(ctx context.Context) (Stats, error) {
	if f == nil || f.c == nil {
		return Stats{}, fmt.Errorf("bloomfilter: nil filter")
	}
	pg, pn := f.pending.take()
	r, err := filterScript.Run(ctx, f.c, f.keys, "stats", f.size.Bits, f.size.Hashes, f.size.Capacity, msec(f.period), 1, 0, pg, pn).Int64Slice()
	if err != nil {
		return Stats{}, scriptError(err)
	}
	if len(r) != 9 {
		return Stats{}, fmt.Errorf("bloomfilter: stats script replied %d values, want 9", len(r))
	}
	var s Stats
	if r[0] == 0 {
		return s, nil
	}
	s.Generation, s.Added, s.Started = r[1], r[2], time.UnixMilli(r[3])
	if r[7] == 1 {
		s.Current = f.generation(r[5])
	}
	if r[8] == 1 {
		s.Previous = f.generation(r[6])
	}
	k := float64(f.size.Hashes)
	s.FalsePositiveRate = 1 - (1-math.Pow(s.Current.FillRatio, k))*(1-math.Pow(s.Previous.FillRatio, k))
	return s, nil
}

func (f *Filter) generation(bits int64) GenerationStats {
	m := float64(f.size.Bits)
	g := GenerationStats{BitsSet: bits, FillRatio: float64(bits) / m}
	if g.FillRatio < 1 {
		g.EstimatedCount = -m / float64(f.size.Hashes) * math.Log1p(-g.FillRatio)
	} else {
		g.EstimatedCount = math.Inf(1)
	}
	return g
}
