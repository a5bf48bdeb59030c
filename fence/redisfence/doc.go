// Package redisfence guards Redis keys with fencing tokens, on one Redis
// server or a Redis Cluster, through go-redis v9.
//
// Each guarded key K has a token key next to it holding the highest token
// applied to K. A holder that reads K before writing it reads with
// [Guard.Read] (a string) or [Guard.HRead] (a hash): one Lua script raises
// the token key to the holder's token, refused if it is higher, and returns
// K's value. Then it writes with [Guard.Set], [Guard.HSet] or [Guard.Del]:
// one Lua script compares the writer's token with the token key and writes
// both, or neither, in one step; a lower token changes nothing and returns an
// error wrapping [fence.ErrStale].
//
// The claim in the read is what keeps a read-modify-write whole. Fencing the
// write alone refuses a stale write only once a newer token has reached the
// key: the fresh holder (token 2) reads 1000; the paused stale holder (token
// 1) wakes and writes 900, accepted because the key still carries token 0;
// the fresh holder writes 700 from its read, and the stale holder's
// acknowledged debit is gone. With Read, token 2 is on the key before the
// value is read, and the stale write is refused. Redis runs one script at a
// time, so between the read and the write only a holder with a token at
// least as high can write; if one does, the later write is refused: an update
// may be refused, never lost.
//
// The token key is named so that it lands in K's hash slot: K plus a suffix
// when K has a hash tag ("{order:7}.status" -> "{order:7}.status:fence"), and
// otherwise K wrapped in braces plus the suffix ("balance:7" ->
// "{balance:7}:fence"), which Redis Cluster hashes exactly as it hashes K. A
// key that has no hash tag but contains '}' cannot be given such a name and is
// refused with fence.ErrInvalid.
//
// Token keys never expire, so a key's token survives the expiry or deletion of
// its data: a stale writer cannot bring a deleted record back, and a claim on
// a key with no value holds against a stale holder that would create it.
package redisfence
