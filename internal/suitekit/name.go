// Package suitekit holds what the conformance suites (lock/locktest,
// elect/electtest, semaphore/semaphoretest, rwlock/rwlocktest,
// fence/fencetest) share: names unique to a test and run, a bounded context
// per test, the checks on a held lease or permit, the check that a backend
// left no goroutines running, and the child processes of the checks that
// need several.
package suitekit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"testing"
	"time"
)

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Name returns prefix, t's name with every character a backend might refuse
// replaced by "_", and 32 random bits in hex, joined by sep: a key or name
// no other test or run uses.
func Name(t testing.TB, prefix, sep string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + sep + unsafeChars.ReplaceAllString(t.Name(), "_") + sep + hex.EncodeToString(b[:])
}

// Context returns t's context bounded to d, cancelled when t ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
