package dedup

import "context"

// Message is one delivery as the deduplicator sees it.
type Message struct {
	// ID identifies the message across redeliveries and republishing: the
	// producer's message id or a business key, never a broker's delivery tag
	// or stream entry id (a republished copy gets a new one). It must be 1 to
	// MaxIDLen bytes of UTF-8 without control characters.
	ID string
	// Body is the payload; the deduplicator does not read it.
	Body []byte
	// Header holds broker metadata an adapter chooses to pass on; it may be
	// nil.
	Header map[string]string
}

// Handler processes one message. A nil error means the message took effect
// and may be acknowledged; any other error means it did not and should be
// redelivered.
type Handler func(ctx context.Context, m Message) error
