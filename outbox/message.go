package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/latchkey-go/latchkey/dedup"
)

// Lengths, in bytes, of a message's names.
const (
	// MaxTopicLen is the longest topic.
	MaxTopicLen = 255
	// MaxKeyLen is the longest ordering key.
	MaxKeyLen = 255
)

// Message is one message in the outbox.
type Message struct {
	// ID identifies the message to its consumers across every copy the
	// relay publishes: consumers deduplicate on it. Empty: Add generates
	// one (32 hex digits from crypto/rand). It follows dedup.CheckID's rules
	// and is unique in the outbox.
	ID string
	// Topic is where the publisher sends the message: a NATS subject, an
	// AMQP routing key, a Redis stream. Required; at most MaxTopicLen bytes
	// of printable UTF-8.
	Topic string
	// Key orders messages: the messages of one key are published in the
	// order their transactions committed, and a message whose publication
	// fails holds back the later ones of its key. Empty: not ordered with
	// any other message. At most MaxKeyLen bytes of printable UTF-8.
	Key string
	// Payload is the message body.
	Payload []byte
	// Headers are passed to the publisher as they are.
	Headers map[string]string

	// Seq is the message's place among its key's messages, 1 for the first;
	// 0 for a message without a key. Set by Add, ignored when given.
	Seq int64
	// Created is when the message was added, by the database's clock. Set
	// for the messages a Relay reads; ignored by Add.
	Created time.Time
}

// newID returns a random message id.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// check validates m as Add receives it.
func (m *Message) check() error {
	if m.ID != "" {
		if err := dedup.CheckID(m.ID); err != nil {
			return fmt.Errorf("%w: message id: %w", ErrInvalid, err)
		}
	}
	if m.Topic == "" {
		return fmt.Errorf("%w: message %q has no topic", ErrInvalid, m.ID)
	}
	if err := printable("topic", m.Topic, MaxTopicLen); err != nil {
		return err
	}
	return printable("key", m.Key, MaxKeyLen)
}

// printable reports an error unless s is at most max bytes of UTF-8 without
// control characters.
func printable(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalid, what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s holds control character %U", ErrInvalid, what, r)
		}
	}
	return nil
}

// Headers a publisher adds to a keyed message, so that consumers can check
// the order: the key, and its sequence number in decimal.
const (
	HeaderKey = "Outbox-Key"
	HeaderSeq = "Outbox-Seq"
)

// PublishHeaders returns the headers a publisher sends with m: m.Headers,
// plus HeaderKey and HeaderSeq when m has a key (they replace headers of
// the same names).
func PublishHeaders(m Message) map[string]string {
	h := make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		h[k] = v
	}
	if m.Key != "" {
		h[HeaderKey] = m.Key
		h[HeaderSeq] = strconv.FormatInt(m.Seq, 10)
	}
	return h
}
