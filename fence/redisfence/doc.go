// Package redisfence guards writes to Redis keys with fencing tokens, on one
// Redis server or a Redis Cluster, through go-redis v9.
//
// Each guarded key K has a token key next to it holding the highest token
// applied to K. A [Guard] writes K (SET, HSET or DEL) with one Lua script that
// compares the writer's token with the token key and writes both, or neither,
// in one step; a lower token changes nothing and returns an error wrapping
// [fence.ErrStale].
//
// The token key is named so that it lands in K's hash slot: K plus a suffix
// when K has a hash tag ("{order:7}.status" -> "{order:7}.status:fence"), and
// otherwise K wrapped in braces plus the suffix ("balance:7" ->
// "{balance:7}:fence"), which Redis Cluster hashes exactly as it hashes K. A
// key that has no hash tag but contains '}' cannot be given such a name and is
// refused with fence.ErrInvalid.
//
// Token keys never expire, so a key's token survives the expiry or deletion of
// its data: a stale writer cannot bring a deleted record back.
package redisfence
