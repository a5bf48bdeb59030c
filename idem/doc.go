// Package idem makes an operation that is delivered many times (double click,
// gateway retry, broker redelivery) take effect once, and gives every copy the
// first one's answer.
//
// The cycle, the same for every [Store]:
//
//  1. Claim the key atomically, with a fingerprint of the request and an
//     in-progress deadline ([Begin], [Store.Claim]).
//  2. Run the operation once, under a context that ends at the deadline.
//  3. Record the outcome for a retention period (default 24 h), or release
//     the claim when nothing took effect, so that a retry runs
//     ([Run.Record], [Run.Release]).
//  4. A later copy with the same key replays the outcome; a copy with the
//     same key but another fingerprint gets [ErrFingerprintMismatch]; a copy
//     arriving while the first runs gets [ErrInProgress] or, with
//     [WithWait], waits and replays.
//
// A claim whose owner died is taken over after its in-progress deadline and
// never before, and the dead owner's late Record is refused with
// [ErrClaimLost]. So the deadline must be longer than the operation can take.
//
// [Do] is the cycle for plain functions, generic over a JSON-encoded result.
// The idemhttp package is the cycle as net/http middleware for the
// Idempotency-Key header. [IssueToken] and [ConsumeToken] are one-time submit
// tokens for forms.
//
// Stores: memstore (one process), redisstore (Redis or Redis Cluster; one
// round trip to claim or replay), sqlstore (PostgreSQL and SQLite; a unique
// index on the key), and layered (a Redis claim in front of a SQL unique
// index, so a Redis flush or failover cannot let a duplicate through). Every
// store passes the idemtest conformance suite.
//
// Keys are data: stores never splice them into scripts or SQL. Build scoped
// keys with [Key], which encodes each part so no two tuples alias.
//
// Every store is also an [Inspector]: an operator looks up the record a
// customer's retry keeps meeting ([Inspector.Lookup]) and forgets it so the
// next request runs ([Inspector.Forget]); a record in progress is forgotten
// only when forced. idemhttp.StoreKey builds the key of an HTTP request's
// record from its principal, method, route and client key.
package idem
