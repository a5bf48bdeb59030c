package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// A proc is a running worker process.
type proc struct {
	name  string
	ready event // what it said when it was ready (set by cast)
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu     sync.Mutex
	lines  []event // guarded by mu
	next   int     // guarded by mu; first unconsumed line
	notify chan struct{}
	eof    chan struct{} // closed when stdout is drained
	stderr lockedBuffer

	stopOnce sync.Once
	waitErr  error // set by stopOnce
}

// startWorker starts this program again as "latchkey demo-worker args...",
// with env added to its environment (URLs travel there, not in the
// arguments, so no password shows in a process listing). The process is
// killed when ctx is done.
func startWorker(ctx context.Context, self, name string, env []string, args ...string) (*proc, error) {
	cmd := exec.CommandContext(ctx, self, append([]string{WorkerCommand}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	dieWithParent(cmd)
	cmd.WaitDelay = 2 * time.Second
	p := &proc{name: name, cmd: cmd, notify: make(chan struct{}, 1), eof: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go p.read(stdout)
	return p, nil
}

func (p *proc) read(r io.Reader) {
	defer close(p.eof)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			ev = event{Kind: kindError, Msg: "unexpected output: " + sc.Text()}
		}
		p.mu.Lock()
		p.lines = append(p.lines, ev)
		p.mu.Unlock()
		select {
		case p.notify <- struct{}{}:
		default:
		}
	}
}

// Next returns the worker's next event. A worker that reports an error, exits
// or stays silent past timeout makes it return an error.
func (p *proc) Next(ctx context.Context, timeout time.Duration) (event, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		p.mu.Lock()
		if p.next < len(p.lines) {
			ev := p.lines[p.next]
			p.next++
			p.mu.Unlock()
			if ev.Kind == kindError {
				return ev, fmt.Errorf("%s: %s", p.name, ev.Msg)
			}
			return ev, nil
		}
		p.mu.Unlock()
		select {
		case <-p.notify:
		case <-p.eof:
			p.mu.Lock()
			more := p.next < len(p.lines)
			p.mu.Unlock()
			if !more {
				return event{}, fmt.Errorf("%s exited early%s", p.name, p.stderrTail())
			}
		case <-t.C:
			return event{}, fmt.Errorf("%s: nothing heard for %v%s", p.name, timeout, p.stderrTail())
		case <-ctx.Done():
			return event{}, ctx.Err()
		}
	}
}

// Expect returns the next event, which must be of kind k.
func (p *proc) Expect(ctx context.Context, k kind, timeout time.Duration) (event, error) {
	ev, err := p.Next(ctx, timeout)
	if err == nil && ev.Kind != k {
		err = fmt.Errorf("%s: said %q, expected %q", p.name, ev.Kind, k)
	}
	return ev, err
}

// Go tells a worker waiting after "ready" to start.
func (p *proc) Go() error { return p.Send("go") }

// Send writes one line to the worker's stdin.
func (p *proc) Send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// Pause stops the process with SIGSTOP, as a long GC pause or a VM freeze
// would; Resume lets it go on.
func (p *proc) Pause() error { return signalProc(p.cmd.Process, sigStop) }

// Resume continues a paused process (SIGCONT).
func (p *proc) Resume() error { return signalProc(p.cmd.Process, sigCont) }

// Wait waits for the worker to exit by itself and returns its failure, if any.
func (p *proc) Wait(ctx context.Context) error {
	select {
	case <-p.eof:
	case <-ctx.Done():
		p.Kill()
		return ctx.Err()
	}
	p.stopOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	if p.waitErr != nil {
		return fmt.Errorf("%s: %w%s", p.name, p.waitErr, p.stderrTail())
	}
	return nil
}

// Kill sends SIGKILL and reaps the process. Safe to call more than once and
// after Wait.
func (p *proc) Kill() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.stdin.Close()
		<-p.eof
		p.waitErr = p.cmd.Wait()
	})
}

func (p *proc) stderrTail() string {
	s := strings.TrimSpace(p.stderr.String())
	if s == "" {
		return ""
	}
	if len(s) > 500 {
		s = "..." + s[len(s)-500:]
	}
	return ": " + s
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// selfPath is the program to start workers from: this very binary.
func selfPath() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", errors.New("cannot find my own executable to start workers: " + err.Error())
	}
	return p, nil
}
