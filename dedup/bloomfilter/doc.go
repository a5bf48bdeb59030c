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
// # Layout and atomicity
//
// Keys, all under one hash tag, the filter's name, so a Cluster keeps a
// filter on one slot: prefix + "{" + name + "}:state" (a hash: generation
// number, ids added to it, its start on Redis's clock, m and k),
// ":bits:0" and ":bits:1" (the generations, alternating), and for Lossy
// ":claim:" + id while a message is in processing. Bit positions are
// computed in Go (SHA-256 of the id, enhanced double hashing) and passed as
// arguments; ids never become script code. One embedded Lua script does
// every step for one id or a batch: check, add, rotate (when the current
// generation is full or its period has passed), claim, done and release, so
// concurrent consumers cannot race on a rotation or an id. Keys expire with
// PEXPIREAT when their generation leaves the window. [Filter.Stats] gives
// each generation's fill ratio and estimated count for a metrics collector.
//
// # What each step asks of Redis
//
// A check-and-add (TestAndAdd, TestAndAddBatch) is one EVALSHA; inside it:
//
//   - TIME: Redis's clock, for rotation by period, so that all consumers
//     agree on it whatever their own clocks say;
//   - HMGET of the state (generation, count, start, m, k): which bitmap is
//     current, whether it is full or its period is over, and that the
//     sizing matches;
//   - GETBIT on the previous generation, per id, stopping at the first 0:
//     one or two reads for a new id;
//   - one BITFIELD SET u1 on the current generation for up to 1800/k ids
//     (225 at k = 8): it sets each id's k bits and returns the old ones, so
//     it is the check against the current generation and the add at once,
//     in the order of the batch (an id given twice is seen by its second
//     occurrence); a batch that would overfill the generation is split
//     where it becomes full, and the next generation starts there;
//   - HSET of the count (and, after a rotation, of the whole state, with
//     PEXPIREAT; a rotation also writes the new generation's bitmap with
//     SET ... PXAT, at its full size).
//
// That is five commands for one id, against about fourteen with a GETBIT
// per bit read and a SETBIT per bit set; a batch of 100 adds one GETBIT or
// two per id and shares the rest. Redis spends most of a script's time
// starting it and passing arguments and replies between Lua and its
// commands (in a loop inside one script, some 0.1 µs an argument and 0.2
// to 0.5 µs a command; more when each call starts cold), little on the
// bits themselves: one id costs Redis 10 to 12 µs and an id in a batch of
// 100 4 to 5 µs, against 1 µs for a plain SET NX (bench/, "What a message
// costs Redis", counting each command sent once).
// Lossy's Claim reads both generations (GETBIT) and sets the claim key (SET
// NX PX); its Done checks the token (GET), adds the id as above and deletes
// the claim key (DEL).
//
// A Redis restart without persistence, or a failover before replication,
// empties the filter: every id is then new to it. With Lossy that lets
// duplicates through; with Prefilter the exact store still stops them.
package bloomfilter
