package etcdlock

import (
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/lock"
)

// One name is one resource: a lock (an election's term included), a
// read-write lock and a semaphore of one name exclude each other. Each
// acquisition puts its key and, in the same transaction, counts the keys
// of the other modes of its name; if there are any it deletes its key again
// and fails with a *lock.ModeError. Of two acquisitions in different modes
// the later transaction sees the earlier one's key, so they never both get
// in (both may give up, if each put its key before the other counted). The
// keys are read at the default places: a lock's under <name>/ (hexadecimal
// lease ids, as concurrency.Mutex writes them), a read-write lock's under
// <name>/read/ and <name>/write/, a semaphore's under
// DefaultSemaphorePrefix<name>/, each after the prefix of WithPrefix.

// modeOps are the count-only reads of the keys of name's modes other than
// own, under the Locker's prefix; modeOf reads their
// answers back.
func modeOps(prefix, name, own string) []clientv3.Op {
	dir := prefix + name + "/"
	var ops []clientv3.Op
	if own != lock.ModeLock {
		// Lock keys are dir + a lease id in lowercase hexadecimal.
		ops = append(ops, clientv3.OpGet(dir+"0", clientv3.WithRange(dir+"g"), clientv3.WithCountOnly()))
	}
	if own != lock.ModeReadWrite {
		ops = append(ops,
			clientv3.OpGet(dir+"read/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(dir+"write/", clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	if own != lock.ModeSemaphore {
		ops = append(ops, clientv3.OpGet(prefix+DefaultSemaphorePrefix+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	return ops
}

// modeOf returns the *lock.ModeError of an acquisition in mode own whose
// modeOps were answered by resps, the transaction's last responses, or nil
// if no other mode has a key for name.
func modeOf(name, own string, resps []*etcdserverpb.ResponseOp) error {
	var held []string
	if own != lock.ModeLock {
		held = append(held, lock.ModeLock)
	}
	if own != lock.ModeReadWrite {
		held = append(held, lock.ModeReadWrite, lock.ModeReadWrite)
	}
	if own != lock.ModeSemaphore {
		held = append(held, lock.ModeSemaphore)
	}
	if len(resps) < len(held) {
		return nil
	}
	for i, r := range resps[len(resps)-len(held):] {
		if rr := r.GetResponseRange(); rr != nil && rr.Count > 0 {
			return &lock.ModeError{Key: name, HeldAs: held[i]}
		}
	}
	return nil
}
