package testsvc

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// echoServer echoes every connection until the client half-closes, then
// half-closes too. It is stopped, and its goroutines waited for, at cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialRoundTrip connects and makes one round trip; the reset of a refused
// connection may come as soon as the dial or only at the first read.
func dialRoundTrip(addr, msg string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return roundTrip(c, msg, time.Second)
}

// roundTrip writes msg and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo mismatch: " + string(buf))
	}
	return nil
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	for _, msg := range []string{"hello", "world", string(make([]byte, 200<<10))} {
		if err := roundTrip(c, msg, 2*time.Second); err != nil {
			t.Fatalf("round trip of %d bytes: %v", len(msg), err)
		}
	}
	// Half-close passes through: the echo server answers the FIN with its own.
	_, _ = c.Write([]byte("bye"))
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "bye" {
		t.Fatalf("after half-close read %q, %v; want \"bye\", EOF", rest, err)
	}
}

func TestProxyCutRestore(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if err := roundTrip(c, "before", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	// The open connection is dead...
	if err := roundTrip(c, "during", time.Second); err == nil {
		t.Fatal("round trip on a cut connection succeeded")
	} else if os.IsTimeout(err) {
		t.Fatalf("cut connection hung instead of failing: %v", err)
	}
	// ...and so is every new one.
	if err := dialRoundTrip(p.Addr(), "during"); err == nil || os.IsTimeout(err) {
		t.Fatalf("new connection during a cut: %v, want a prompt error", err)
	}
	p.Restore()
	c3 := dial(t, p.Addr())
	if err := roundTrip(c3, "after", time.Second); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	// The cut connection stays closed.
	if err := roundTrip(c, "after", 200*time.Millisecond); err == nil {
		t.Fatal("connection closed by Cut works again after Restore")
	}
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	const d = 100 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	if err := roundTrip(c, "slow", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip with %v latency took %v, want >= %v", d, rtt, 2*d)
	}
	// Latency delays chunks; it does not serialize them: 5 writes in a row
	// arrive about 2d later in total, not 10d.
	start = time.Now()
	for range 5 {
		_, _ = c.Write([]byte("x"))
		time.Sleep(5 * time.Millisecond)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 2*d || el > 9*d {
		t.Errorf("5 pipelined chunks took %v, want between %v and %v", el, 2*d, 9*d)
	}
	p.SetLatency(0)
	start = time.Now()
	if err := roundTrip(c, "fast", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt >= 2*d {
		t.Errorf("round trip without latency took %v", rtt)
	}
}

func TestProxyBlackhole(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if err := roundTrip(c, "before", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	err := roundTrip(c, "lost", 300*time.Millisecond)
	if !os.IsTimeout(err) {
		t.Fatalf("round trip in a blackhole: %v, want a timeout", err)
	}
	// New connections open but carry nothing either.
	c2 := dial(t, p.Addr())
	if err := roundTrip(c2, "lost", 200*time.Millisecond); !os.IsTimeout(err) {
		t.Fatalf("new connection in a blackhole: %v, want a timeout", err)
	}
	p.Blackhole(false)
	// The same connection works again; what was sent meanwhile is gone.
	if err := roundTrip(c, "after", time.Second); err != nil {
		t.Fatalf("after the blackhole: %v", err)
	}
	if err := roundTrip(c2, "after", time.Second); err != nil {
		t.Fatalf("connection opened in the blackhole, after it: %v", err)
	}
}

func TestProxyTargetDown(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, "127.0.0.1:"+strconv.Itoa(FreePort(t)))
	if err := dialRoundTrip(p.Addr(), "x"); err == nil || os.IsTimeout(err) {
		t.Fatalf("proxy to a dead target: %v, want a prompt error", err)
	}
}

func TestProxyNoGoroutineLeak(t *testing.T) {
	// Not parallel: it counts goroutines.
	echo := echoServer(t)
	before := runtime.NumGoroutine()
	t.Run("busy", func(t *testing.T) {
		p := NewProxy(t, echo)
		p.SetLatency(20 * time.Millisecond)
		for range 5 {
			c := dial(t, p.Addr())
			if err := roundTrip(c, "ping", time.Second); err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte("in flight")) // left queued in the proxy
		}
		p.Blackhole(true)
		_, _ = dial(t, p.Addr()).Write([]byte("dropped"))
	})
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after the proxy's cleanup:\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
