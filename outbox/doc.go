// Package outbox is the transactional outbox: a service writes the messages
// of a change in the same database transaction as the change, and a relay
// publishes them afterwards. A message of a transaction that rolled back is
// never published; a message of one that committed is published at least
// once, even when the service crashes right after the commit.
//
// [Outbox.Add] writes messages (id, topic, key, payload, headers) in the
// caller's transaction, on PostgreSQL, MySQL or MariaDB, and SQLite through
// database/sql; package outbox/pgxoutbox does the same in a pgx.Tx.
// [Outbox.Migrate] creates the tables.
//
//	tx, _ := db.BeginTx(ctx, nil)
//	defer tx.Rollback()
//	tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - 10 WHERE id = $1`, id)
//	ob.Add(ctx, tx, outbox.Message{Topic: "payments", Key: id, Payload: body})
//	tx.Commit()
//
// A [Relay] is a fenced leader: it runs under an elect.Election on any lock
// backend, so one relay publishes at a time, and it marks messages
// published in a transaction that first raises the outbox's relay row to
// its term's fencing token, refused when the row holds a higher one. A
// relay that was paused or cut off and wakes after a newer term wrote can
// neither mark nor purge: it gets [ErrFenced] and its term ends.
//
// Publishing is at least once: a relay that dies between publishing and
// marking leaves the messages pending, and the next leader publishes them
// again. Every message carries its id (Nats-Msg-Id on JetStream, the
// message-id property on RabbitMQ, a field on Redis Streams: packages
// natsoutbox, amqpoutbox, redisoutbox), so latchkey's deduplicating
// consumers take each into effect once.
//
// Order: the messages of one key are numbered in commit order (Seq, sent
// as the Outbox-Seq header) and published in that order; a failed
// publication holds back the later messages of its key only, which back
// off and are retried. Messages without a key are not ordered.
//
// [Outbox.Stats] reports the pending count and the oldest pending
// message's age, the lag an operator alerts on; "latchkey outbox show"
// prints them, and metrics.NewOutbox exports them to Prometheus.
// docs/outbox.md is the guide.
package outbox
