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
// filter on one slot: prefix + "{" + name + "}:state" (a hash: the
// generation's number g, its start t on Redis's clock, m (as "v2:" and the
// number) and k, and "c:" + g, the ids added to generation g), ":cur" and
// ":prev" (the current and the previous generation: a rotation renames the
// first to the second and starts an empty ":cur"), and for Lossy ":claim:"
// + id while a message is in processing. Bit positions are computed in Go
// (SHA-256 of the id, enhanced double hashing) and passed as arguments; ids
// never reach Redis. Keys expire with PEXPIREAT when their generation
// leaves the window. [Filter.Stats] gives each generation's fill ratio and
// estimated count for a metrics collector.
//
// Every rotation (when the current generation is full or its period has
// passed) runs in one embedded Lua script, as do Lossy's claim, done and
// release. Far from a rotation a check-and-add does not need the script:
// the two generations' keys are fixed, so a transaction of plain commands
// on them can neither split a rotation nor be split by one, and of
// concurrent adds of one new id exactly one finds a bit clear.
//
// # What each step asks of Redis
//
// A check-and-add (TestAndAdd, TestAndAddBatch) far from a rotation is one
// MULTI/EXEC of plain commands:
//
//   - BITFIELD_RO ":prev" GET u1 per bit: the previous generation's bits;
//   - BITFIELD ":cur" SET u1 per bit: sets each id's k bits and replies the
//     old ones, so it is the check against the current generation and the
//     add at once, in the order of the batch (an id given twice is seen by
//     its second occurrence);
//   - PTTL ":cur": the generation's age (it expires two periods after its
//     start), so the client knows when to hand over to the script;
//   - PEXPIRE ":cur" NX: a bitmap this made, the state being gone, expires;
//   - HINCRBY of "c:" + g, with PEXPIRE NX of the state, only when the
//     client's last step added ids: a transaction cannot count only the ids
//     it finds new, so the next step counts them, for the generation they
//     went to;
//   - HMGET of m, g and the count: the sizing, the generation, how full.
//
// One id costs Redis about 4.7 µs this way and an id in a batch of 100
// about 2.9 µs, against 10 to 12 µs and 4 to 5 µs through a script, which
// Redis spends mostly on starting it and passing arguments between Lua and
// its commands (bench/, "What a message costs Redis", counting each command
// sent once, EXEC and a script with the commands they run). The last
// eighth of a generation's period and of its capacity (at least MaxChunk
// ids) go through the script, which counts exactly, rotates and reads
// Redis's clock (TIME): a generation takes at most what the consumers
// added in their last step each beyond its capacity, and never an id
// later than its period allows. Lossy's Claim reads both generations
// (GETBIT) and sets the claim key (SET NX PX); its Done checks the token
// (GET), adds the id (BITFIELD) and deletes the claim key (DEL).
//
// A filter written by the first release of this package (generations at
// ":bits:0" and ":bits:1" by parity) is taken over at this release's first
// step: its generations are moved to ":cur" and ":prev". Clients of the
// first release are refused from then on (their script reports a sizing
// mismatch), so upgrade every consumer of one filter together.
//
// A Redis restart without persistence, or a failover before replication,
// empties the filter: every id is then new to it. With Lossy that lets
// duplicates through; with Prefilter the exact store still stops them.
package bloomfilter
