// Package lockerr builds the errors lock backends return, so that a chain
// reads once: each layer adds what it knows, and a sentinel's own text does
// not repeat in the middle of it.
package lockerr

import "github.com/latchkey-go/latchkey/lock"

// NotHeld returns an error that reads msg ("redislock: the lock expired or
// another owner holds it") and wraps lock.ErrNotHeld.
func NotHeld(msg string) error { return notHeld(msg) }

type notHeld string

func (e notHeld) Error() string        { return string(e) }
func (e notHeld) Is(target error) bool { return target == lock.ErrNotHeld }
