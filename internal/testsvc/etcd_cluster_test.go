package testsvc

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestEtcdCluster(t *testing.T) {
	c := StartEtcdCluster(t, 3)
	if len(c.Endpoints()) != 3 {
		t.Fatalf("Endpoints() = %v, want 3", c.Endpoints())
	}
	for _, ep := range c.Endpoints() {
		if err := etcdDial(ep); err != nil {
			t.Fatalf("dial %s: %v", ep, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Members[leader]
	if err := m.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for m.Pid() != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	next, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("leader is still member %d after it was killed", leader)
	}
	m.Start() // rejoins from its data directory
	if err := etcdDial(m.Endpoint()); err != nil {
		t.Fatalf("after Start: %v", err)
	}
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
}
