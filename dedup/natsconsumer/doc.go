// Package natsconsumer consumes a NATS JetStream pull consumer through a
// deduplicating handler (nats.go's jetstream package), so each message takes
// effect once although JetStream delivers it at least once.
//
// A [Consumer] fetches bounded batches, runs each message through its
// handler, normally [dedup.Deduper.Wrap], and settles it as
// [dedup.ShouldAck] says: processed messages and duplicates are acknowledged
// (Ack); a message whose handler failed is negatively acknowledged with the
// configured delay (NakWithDelay), and one whose id another consumer is
// processing with the time left on that claim ([dedup.RetryAfter]). The
// server redelivers what was nacked, and what was never settled (a consumer
// that died) once the consumer's AckWait has passed.
//
// The dedup id is a message header (default "Nats-Msg-Id"): the producer's
// message id or business key, never the stream sequence, which a republished
// copy does not share.
//
// Acks are sent without waiting for the server's confirmation: an ack lost
// on the way brings the message back after AckWait, and the deduplicator
// acknowledges it then as a duplicate.
//
// # Broker-side deduplication and its limits
//
// [Publish] sets the Nats-Msg-Id header, so the stream drops a republished
// copy with the same id that arrives within the stream's duplicate window
// (StreamConfig.Duplicates, 2 minutes by default) and reports it in
// PubAck.Duplicate. That window is all it is: a copy published after it, a
// copy published under another Nats-Msg-Id, or a redelivery of a stored
// message (a consumer that failed or did not acknowledge in time) is not
// caught by the broker, and the window is only as reliable as the server's
// tracking of ids (see nats-server issue #3272). The Consumer's deduplicator
// is what makes effects exactly once; the broker's window only saves work.
//
// # Consumer configuration
//
// Use AckPolicy explicit. Set AckWait longer than the deduplicator's
// processing TTL: a message redelivered sooner finds its id still claimed and
// is nacked again, costing a delivery. Every delivery counts against
// MaxDeliver, including the nacks of failed and busy copies: with a
// MaxDeliver other than -1 (unlimited) a message whose handler keeps failing
// is, after that many deliveries, no longer delivered to the consumer (the
// server publishes a MAX_DELIVERIES advisory). A message without a valid id
// header is never handed to the handler; it is nacked and reported at each
// delivery.
package natsconsumer
