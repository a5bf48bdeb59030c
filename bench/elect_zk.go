package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// zkJar is Debian's ZooKeeper server (apt-get install zookeeper).
const zkJar = "/usr/share/java/zookeeper.jar"

// startZooKeeper starts a private standalone ZooKeeper whose sessions may be
// as short as 1 s (checked every 500 ms, its tick) and returns it with its
// address.
func startZooKeeper() (*server, string, error) {
	if _, err := os.Stat(zkJar); err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "latchkey-bench-zk-")
	if err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cfg := fmt.Sprintf("tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=10000\nadmin.enableServer=false\n"+
		"dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n", filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, "", err
	}
	s, err := startProc("java", dir, "-Xmx256m", "-XX:+UseSerialGC", "-cp", zkJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l, err := zklock.New(ctx, []string{addr})
		cancel()
		if err == nil {
			_ = l.Close()
			return s, addr, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, "", fmt.Errorf("zookeeper did not start: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cutProxy forwards one client's connections to a server until cut, when
// it closes them all and refuses new ones: a ZooKeeper client that dies
// this way sends no closeSession, so, as for a SIGKILLed process, the
// server ends the session only after its timeout.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(target string) (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p, nil
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// zkImpl is latchkey on ZooKeeper with 1 s sessions and terms; each
// candidate reaches the server through a proxy of its own, which its death
// cuts.
func zkImpl(ctx context.Context, addr string) electImpl {
	const ttl = time.Second
	return latchkeyImpl("latchkey ZooKeeper", ttl, func() (lock.Locker, func(), error) {
		p, err := newCutProxy(addr)
		if err != nil {
			return nil, nil, err
		}
		l, err := zklock.New(ctx, []string{p.addr()}, zklock.WithSessionTimeout(ttl))
		if err != nil {
			p.cut()
			return nil, nil, fmt.Errorf("zookeeper through a proxy: %w", err)
		}
		return l, func() { p.cut(); _ = l.Close() }, nil
	})
}
