// Package bloomfilter is an approximate message-id deduplicator: a Bloom
// filter on plain Redis bitmaps (GETBIT/BITFIELD, no Redis module), sized from
// the expected number of ids and a target false-positive rate, and rotated
// by generation so that ids age out.
//
//	f, err := bloomfilter.New(client, "orders", 1_000_000, 0.01, bloomfilter.WithPeriod(24*time.Hour))
//	seen, err := f.TestAndAdd(ctx, msgID)      // one round trip
//	seen, err := f.TestAndAddBatch(ctx, ids)   // one round trip per 1000 ids
//
// # What a false positive costs
//
// A Bloom filter never forgets an id it holds (within its window), but it may
// report an id it never saw as seen: with probability up to the configured
// rate once both generations are full, less while they fill. Deduplicating
// on the filter alone ([Lossy]) therefore drops that fraction of genuinely
// new messages: at 1% and a million messages a day, up to ten thousand
// messages a day are acknowledged without ever being processed. Use it only
// where that is acceptable (view counts, cache invalidations, notifications
// that may be missed), never where a message moves money.
//
// In front of an exact store ([Prefilter]) a false positive costs nothing
// but the exact check, and no message is lost: the exact store decides
// every claim. Read the Prefilter's doc for what that does and does not
// save: with the exact stores of this module, it saves no round trip.
//
// # Sizing and memory
//
// A check consults two generations, so each is sized for the rate r' = 1 -
// sqrt(1 - r) (about r/2) to keep the combined rate at most r: m = -n ln r' /
// ln²2 bits and k = round(m/n ln 2) hashes per generation. At r = 1% that is
// 11.03 bits per id (k = 8) per generation, 1.15 times the 9.59 bits of a
// single filter without ageing: 1.38 bytes per id, against 136 bytes for a
// dedup/redisstore done record of a 24-byte id (MEMORY USAGE, Redis 7.0). Redis's
// allocator rounds each bitmap up to its size class, up to a quarter more
// (13.1 bits per id measured at 50,000 and 100,000 ids, 12.6 at two
// million). A generation is one Redis string of m bits: at most 2^32 bits
// (512 MiB), about 390 million ids per generation at 1%.
//
// # Internals
//
// The key layout, why each step is atomic and what each step asks of Redis
// are described in docs/bloomfilter-internals.md.
package bloomfilter
