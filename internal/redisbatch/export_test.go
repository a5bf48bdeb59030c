package redisbatch

// Sending reports how many sends b has in flight, so a test can wait until
// every send slot is taken instead of sleeping and hoping.
func Sending(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sending
}
