// Package amqpconsumer consumes a RabbitMQ queue (amqp091-go) through a
// deduplicating handler, so each message takes effect once although the
// broker delivers it at least once.
//
// A [Consumer] subscribes with manual acknowledgements and a prefetch limit
// (basic.qos), hands each delivery to its handler, normally
// [dedup.Deduper.Wrap], and acknowledges what [dedup.ShouldAck] says is
// settled: processed messages and duplicates. Any other delivery (the
// handler failed, or another copy of the id is in progress) is negatively
// acknowledged with requeue, and RabbitMQ redelivers it with the redelivered
// flag set. Deliveries a consumer held when its channel or connection died
// are requeued by the broker the same way.
//
// The dedup id is the AMQP message-id property by default, or a header
// ([WithIDHeader]): the producer's message id or business key, never the
// delivery tag, which a redelivered or republished copy does not share.
// [Publish] sets it, with persistent delivery.
//
// RabbitMQ has no delayed requeue without plugins or dead-letter/TTL queue
// chains: a requeued message is redelivered at once, possibly to the same
// consumer. To keep a failing or busy message from spinning, the consumer
// waits before its nack: the time left on the other copy's claim
// ([dedup.RetryAfter]) for a busy copy, capped by [WithMaxRequeueDelay], and
// [WithFailureDelay] after a handler error. The wait holds up this
// consumer's other deliveries; run several consumers for throughput.
//
// A delivery without a valid id can never be processed; it is rejected
// without requeue (dead-lettered when the queue has a dead-letter exchange,
// dropped otherwise) and reported to the error handler.
//
// A Consumer does not reconnect: when its channel closes, Run returns an
// error wrapping [ErrClosed], and the caller opens a new channel and a new
// Consumer.
package amqpconsumer
