package demo

import "time"

// A kind is what happened: the class of a worker's event and of a
// timeline's step (the "kind" of --json, for programs).
type kind string

// The worker protocol: a worker is ready for orders, done with one, or
// stopped by an error.
const (
	kindReady kind = "ready"
	kindDone  kind = "done"
	kindError kind = "error"
)

// What workers report and timelines show.
const (
	kindSent      kind = "sent"      // a request or a message went out
	kindTimeout   kind = "timeout"   // its sender gave up waiting
	kindAnswered  kind = "answered"  // an answer came back
	kindReplayed  kind = "replayed"  // the answer was a replay
	kindConflict  kind = "conflict"  // 409: the first copy still runs
	kindCharged   kind = "charged"   // the card network charged
	kindAcquired  kind = "acquired"  // a lock, or a lease-less lock row, was taken
	kindReleased  kind = "released"  // a lock was let go
	kindNotHeld   kind = "notheld"   // a release found the lock no longer its own (workers only)
	kindRead      kind = "read"      // a value was read
	kindApplied   kind = "applied"   // a write landed
	kindRefused   kind = "refused"   // a write, a try or a duplicate was turned away
	kindPaused    kind = "paused"    // SIGSTOP
	kindResumed   kind = "resumed"   // SIGCONT
	kindKilled    kind = "killed"    // SIGKILL
	kindLost      kind = "lost"      // a lease, or a message, is gone
	kindProcessed kind = "processed" // a message took effect
	kindFailed    kind = "failed"    // a message handler failed
	kindDuplicate kind = "duplicate" // a message was seen done before
	kindSkipped   kind = "skipped"   // a message was skipped as consumed
	kindBusy      kind = "busy"      // a message is being processed elsewhere
	kindSold      kind = "sold"      // a buyer bought
	kindSoldOut   kind = "sold-out"  // a buyer was told none are left
)

// An event is one JSON line a worker prints on stdout; the demo learns what
// happened in its workers only from these and from the shared database.
type event struct {
	Kind  kind   `json:"kind"`
	At    int64  `json:"at,omitempty"` // Unix ns
	Token uint64 `json:"token,omitempty"`
	Value int64  `json:"value,omitempty"` // a balance read or written
	Round int    `json:"round,omitempty"` // a delivery's or an attempt's number
	ID    string `json:"id,omitempty"`    // a charge or a message
	Addr  string `json:"addr,omitempty"`  // a server's listening address
	PID   int    `json:"pid,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

// time is when the event happened.
func (ev event) time() time.Time { return time.Unix(0, ev.At) }
