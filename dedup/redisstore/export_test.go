package redisstore

// UseScriptBatches makes s's batches take the path of servers older than
// Redis 7.0 (the claim script per id), which the test server cannot be.
func UseScriptBatches(s *Store) { s.noSetGet.Store(true) }
