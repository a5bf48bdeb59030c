package fencetest

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Op is the input of one operation in a history: a read or a fenced write of
// one key.
type Op struct {
	Key   string
	Write bool
	Token uint64 // writes: the token written with
	Value string // writes: the value written
}

// Outcome is what an operation returned.
type Outcome struct {
	// Status of a write: "ok" (applied), "stale" (refused with
	// fence.ErrStale) or "unknown" (the writer died or failed mid-call: it may
	// or may not have been applied). Reads are always "ok".
	Status string
	Value  string // reads: the value read
	Token  uint64 // reads: the token read
}

// register is the sequential specification of one key: the value and the
// highest token applied.
type register struct {
	Value string
	Token uint64
}

// Model is the sequential specification of a fenced register per key, for
// porcupine: a write with token t is applied iff t >= the highest token
// applied so far, so a history in which a stale write took effect, or a
// write was refused while it should not have been, is not linearizable.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			k := op.Input.(Op).Key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(register), input.(Op), output.(Outcome)
		if !in.Write {
			return out.Value == s.Value && out.Token == s.Token, s
		}
		fresh := in.Token >= s.Token
		next := s
		if fresh {
			next = register{Value: in.Value, Token: in.Token}
		}
		switch out.Status {
		case "ok":
			return fresh, next
		case "stale":
			return !fresh, s
		default: // unknown: applied if fresh, and it may be placed last
			return true, next
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Op), output.(Outcome)
		if in.Write {
			return fmt.Sprintf("write(%s, %q, t=%d) -> %s", in.Key, in.Value, in.Token, out.Status)
		}
		return fmt.Sprintf("read(%s) -> %q, t=%d", in.Key, out.Value, out.Token)
	},
	DescribeState: func(state any) string {
		s := state.(register)
		return fmt.Sprintf("%q, t=%d", s.Value, s.Token)
	},
}

// Check checks a history: it must be linearizable under Model, and no read
// may return a value whose write was refused as stale. It returns nil or an
// error describing the first violation.
func Check(history []porcupine.Operation) error {
	refused := map[string]bool{}
	for _, op := range history {
		if in := op.Input.(Op); in.Write && op.Output.(Outcome).Status == "stale" {
			refused[in.Key+"\x00"+in.Value] = true
		}
	}
	for _, op := range history {
		if in, out := op.Input.(Op), op.Output.(Outcome); !in.Write && refused[in.Key+"\x00"+out.Value] {
			return fmt.Errorf("read of %s returned %q (token %d), written by a write that was refused as stale: a stale write was applied", in.Key, out.Value, out.Token)
		}
	}
	switch res := porcupine.CheckOperationsTimeout(Model, history, checkTimeout); res {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		return fmt.Errorf("history of %d operations is not linearizable", len(history))
	default:
		return fmt.Errorf("linearizability check of %d operations timed out after %v", len(history), checkTimeout)
	}
}
