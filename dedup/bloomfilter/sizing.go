package bloomfilter

import (
	"fmt"
	"math"

	"github.com/latchkey-go/latchkey/dedup"
)

// MaxBits is the largest generation: a Redis string holds at most 512 MiB,
// 2^32 bits.
const MaxBits = 1 << 32

// Sizing is the shape of a filter, derived from its capacity and its target
// false-positive rate by [NewSizing].
type Sizing struct {
	// Capacity is the number of ids a generation takes before the next one
	// starts.
	Capacity int64
	// Rate is the false-positive rate a check sees at most while both live
	// generations are within capacity: the chance that an id never added is
	// reported seen.
	Rate float64
	// GenerationRate is each generation's own target, 1 - sqrt(1 - Rate)
	// (about Rate/2): a check consults two generations, and an id is
	// reported seen if either says so.
	GenerationRate float64
	// Bits is m, the size of one generation's bitmap.
	Bits uint64
	// Hashes is k, the number of bits per id.
	Hashes int
}

// NewSizing returns the optimal shape for capacity ids per generation at
// false-positive rate at most rate over two generations: k = round(m/n ln 2)
// hashes for m = -n ln(p') / ln²2 bits at the generation rate p' = 1 -
// sqrt(1 - p), then m raised (by well under 1%) until k hashes reach p'. It fails with an error wrapping dedup.ErrInvalid when
// capacity is not positive, rate is not strictly between 0 and 1, or the
// bitmap would exceed MaxBits.
func NewSizing(capacity int64, rate float64) (Sizing, error) {
	if capacity <= 0 {
		return Sizing{}, fmt.Errorf("%w: bloomfilter: capacity %d, want at least 1", dedup.ErrInvalid, capacity)
	}
	if !(rate > 0 && rate < 1) {
		return Sizing{}, fmt.Errorf("%w: bloomfilter: false-positive rate %v, want strictly between 0 and 1", dedup.ErrInvalid, rate)
	}
	pg := 1 - math.Sqrt(1-rate)
	bits := math.Ceil(float64(capacity) * OptimalBitsPerID(pg))
	if bits > MaxBits {
		return Sizing{}, fmt.Errorf("%w: bloomfilter: capacity %d at rate %v needs %.0f bits per generation, more than a Redis string holds (%d)",
			dedup.ErrInvalid, capacity, rate, bits, uint64(MaxBits))
	}
	k := max(1, int(math.Round(bits/float64(capacity)*math.Ln2)))
	// k is rounded, so m at the formula may miss p' by a hair: take the
	// smallest m at which k hashes reach it, (1 - e^(-kn/m))^k <= p'.
	bits = max(bits, math.Ceil(-float64(k)*float64(capacity)/math.Log1p(-math.Pow(pg, 1/float64(k)))))
	if bits > MaxBits {
		return Sizing{}, fmt.Errorf("%w: bloomfilter: capacity %d at rate %v needs %.0f bits per generation, more than a Redis string holds (%d)",
			dedup.ErrInvalid, capacity, rate, bits, uint64(MaxBits))
	}
	m := uint64(max(bits, 1))
	return Sizing{Capacity: capacity, Rate: rate, GenerationRate: pg, Bits: m, Hashes: k}, nil
}

// OptimalBitsPerID is the memory of an optimal Bloom filter at
// false-positive rate p: -ln(p) / ln²2 bits per id (9.59 at 1%).
func OptimalBitsPerID(p float64) float64 { return -math.Log(p) / (math.Ln2 * math.Ln2) }

// BitsPerID is the memory of one generation per id it holds at capacity,
// m/n.
func (s Sizing) BitsPerID() float64 { return float64(s.Bits) / float64(s.Capacity) }

// ExpectedRate is the false-positive rate the integer m and k give when both
// generations hold Capacity ids: 1 - (1 - f)², f = (1 - e^(-kn/m))^k. It is
// at most Rate up to rounding.
func (s Sizing) ExpectedRate() float64 {
	f := generationRate(s.Bits, s.Hashes, float64(s.Capacity))
	return 1 - (1-f)*(1-f)
}

// generationRate is the false-positive rate of one generation of m bits and
// k hashes holding n ids.
func generationRate(m uint64, k int, n float64) float64 {
	return math.Pow(1-math.Exp(-float64(k)*n/float64(m)), float64(k))
}
