package fencetest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func w(client int, key string, token uint64, value, status string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Op{Key: key, Write: true, Token: token, Value: value},
		Output: Outcome{Status: status}, Call: call, Return: ret}
}

func r(client int, key, value string, token uint64, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Op{Key: key},
		Output: Outcome{Status: "ok", Value: value, Token: token}, Call: call, Return: ret}
}

// TestCheckCatchesViolations: the checker must reject each way a fence can
// fail, or the Linearize runs would prove nothing.
func TestCheckCatchesViolations(t *testing.T) {
	for name, h := range map[string][]porcupine.Operation{
		"stale write applied, read sees it": {
			w(0, "k", 5, "new", "ok", 0, 10),
			w(1, "k", 3, "old", "stale", 20, 30),
			r(2, "k", "old", 3, 40, 50),
		},
		"stale write acknowledged as applied": {
			w(0, "k", 5, "new", "ok", 0, 10),
			w(1, "k", 3, "old", "ok", 20, 30),
		},
		"stale write silently applied": {
			w(0, "k", 5, "new", "ok", 0, 10),
			w(1, "k", 3, "old", "unknown", 20, 30),
			r(2, "k", "old", 5, 40, 50),
		},
		"fresh write refused": {
			w(0, "k", 5, "a", "ok", 0, 10),
			w(1, "k", 6, "b", "stale", 20, 30),
		},
		"lost write": {
			w(0, "k", 5, "a", "ok", 0, 10),
			r(1, "k", "", 0, 20, 30),
		},
		"token went back": {
			w(0, "k", 5, "a", "ok", 0, 10),
			w(0, "k", 7, "b", "ok", 11, 20),
			r(1, "k", "b", 5, 30, 40),
		},
	} {
		if err := Check(h); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckAcceptsValidHistories(t *testing.T) {
	for name, h := range map[string][]porcupine.Operation{
		"same holder writes twice, old refused": {
			w(0, "k", 5, "a", "ok", 0, 10),
			w(0, "k", 5, "b", "ok", 11, 20),
			w(1, "k", 4, "z", "stale", 21, 30),
			r(2, "k", "b", 5, 31, 40),
		},
		"concurrent writes in either order": {
			w(0, "k", 5, "a", "ok", 0, 30),
			w(1, "k", 6, "b", "ok", 10, 20),
			r(2, "k", "b", 6, 40, 50),
		},
		"killed writer may not have written": {
			w(0, "k", 5, "a", "ok", 0, 10),
			w(1, "k", 9, "x", "unknown", 20, neverReturned),
			r(2, "k", "a", 5, 40, 50),
		},
		"killed writer may have written": {
			w(1, "k", 9, "x", "unknown", 20, neverReturned),
			r(2, "k", "x", 9, 40, 50),
		},
		"keys are independent": {
			w(0, "a", 9, "a9", "ok", 0, 10),
			w(1, "b", 1, "b1", "ok", 0, 10),
			r(2, "a", "a9", 9, 20, 30),
			r(2, "b", "b1", 1, 20, 30),
		},
	} {
		if err := Check(h); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
