//go:build linux

package outbox_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/outbox"
	"github.com/latchkey-go/latchkey/outbox/amqpoutbox"
	"github.com/latchkey-go/latchkey/outbox/natsoutbox"
)

// The environment of a relay process: the test binary re-executed.
const (
	envRole   = "LATCHKEY_OUTBOX_E2E_ROLE"
	envConfig = "LATCHKEY_OUTBOX_E2E_CONFIG"
)

func TestMain(m *testing.M) {
	roles := map[string]func(string) error{"relay": relayProcess, "writer": writerProcess}
	role := os.Getenv(envRole)
	if role == "" {
		os.Exit(m.Run())
	}
	if err := roles[role](os.Getenv(envConfig)); err != nil {
		fmt.Fprintf(os.Stderr, "%s process: %v\n", role, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// relayConfig is what a relay process is told.
type relayConfig struct {
	PostgresURL string
	Table       string
	Broker      string // "nats" or "amqp"
	BrokerURL   string
	Value       string
	// Between is the chance that a round which published something then
	// says "between" and sleeps before marking, so the test can kill or
	// freeze it between publish and mark.
	Between float64
}

// relayProcess runs a relay until it is killed. It says "leading TOKEN" at
// each term's start, "between N" when it pauses before a mark, and
// "ended ERR" (with "fenced" first, for ErrFenced) at each term's end.
func relayProcess(raw string) error {
	var c relayConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	ctx := context.Background()
	db, err := sql.Open("pgx", c.PostgresURL)
	if err != nil {
		return err
	}
	o, err := outbox.New(db, outbox.WithTable(c.Table))
	if err != nil {
		return err
	}
	locker, err := sqllock.New(ctx, db, sqllock.Postgres)
	if err != nil {
		return err
	}
	e, err := elect.New(locker, "outbox-relay", elect.WithTTL(time.Second))
	if err != nil {
		return err
	}
	p, err := relayPublisher(c)
	if err != nil {
		return err
	}
	r, err := outbox.NewRelay(o, e, p, outbox.WithBatchSize(200), outbox.WithPollInterval(20*time.Millisecond),
		outbox.WithBackoff(20*time.Millisecond, 500*time.Millisecond), outbox.WithPublishTimeout(2*time.Second))
	if err != nil {
		return err
	}
	outbox.SetAfterPublish(r, func(n int) {
		if n > 0 && rand.Float64() < c.Between {
			say("between %d", n)
			time.Sleep(1200 * time.Millisecond)
		}
	})
	return e.Run(ctx, c.Value, func(ctx context.Context, t *elect.Term) error {
		say("leading %d", t.Token())
		return r.Lead(ctx, t)
	}, elect.Again(), elect.WithBackoff(20*time.Millisecond, 200*time.Millisecond), elect.OnTermEnd(func(_ *elect.Term, err error) {
		if errors.Is(err, outbox.ErrFenced) {
			say("fenced")
		}
		say("ended %v", err)
	}))
}

// relayPublisher connects to the broker the config names.
func relayPublisher(c relayConfig) (outbox.Publisher, error) {
	switch c.Broker {
	case "nats":
		nc, err := nats.Connect(c.BrokerURL)
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		return natsoutbox.New(js)
	case "amqp":
		conn, err := amqp.Dial(c.BrokerURL)
		if err != nil {
			return nil, err
		}
		ch, err := conn.Channel()
		if err != nil {
			return nil, err
		}
		return amqpoutbox.New(ch, "")
	}
	return nil, fmt.Errorf("unknown broker %q", c.Broker)
}

var sayMu sync.Mutex

// say writes one line for the parent.
func say(format string, args ...any) {
	sayMu.Lock()
	defer sayMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// proc is a relay or writer process as the test sees it.
type proc struct {
	slot int
	cmd  *exec.Cmd
	err  error         // how it ended; set before done is closed
	done chan struct{} // closed when the process is reaped
}

// procLine is a line a process said.
type procLine struct {
	proc *proc
	text string
}

// startProc starts the test binary as role with config; its lines go to
// lines (nil: none). It is killed at cleanup, and dies with the test
// binary.
func startProc(t *testing.T, role string, slot int, config any, lines chan<- procLine) *proc {
	t.Helper()
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envConfig+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{slot: slot, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- procLine{p, sc.Text()}:
			default: // nobody reads so much, or nobody reads: drop
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL (also to a stopped process) and waits until it is
// reaped.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// freeze stops the process for d, then lets it go on.
func (p *proc) freeze(d time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
}
