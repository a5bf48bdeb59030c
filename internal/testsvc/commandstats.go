package testsvc

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ServerCost is what a Redis server spent on commands.
//
// Calls and Micros come from INFO commandstats summed over every command:
// Calls counts the commands Lua scripts run too, and Micros counts their
// time twice, once in the script's own entry (EVALSHA's time covers the
// commands it ran) and once under their names. Micros is an upper bound of
// the commands' time, not a measure of it.
//
// TopCalls and TopMicros count each command a client sent once: a script's
// time with the commands it ran in it, and a plain command's time. They are
// set only by [CommandStats.Since], from the names a [CommandCounter] saw
// sent. Neither includes reading a command off the socket, parsing it or
// writing its reply, which Redis does outside a command's time.
//
// CPUMicros is the server process's CPU time, user and system (INFO cpu):
// everything, network and parsing included, and background work (about 10
// µs per 100 ms at hz 10).
type ServerCost struct {
	Calls     int64
	Micros    float64
	TopCalls  int64
	TopMicros float64
	CPUMicros float64
}

// CommandStats is a server's INFO commandstats and CPU time at one moment.
type CommandStats struct {
	calls map[string]int64   // by command name, subcommands merged ("config")
	usec  map[string]float64 // likewise
	cpu   float64            // µs, user and system
}

// measuring are the commands that read the statistics: they are left out
// of every cost.
var measuring = map[string]bool{"info": true, "slowlog": true}

// ReadCommandStats reads INFO commandstats and INFO cpu of c's server.
func ReadCommandStats(ctx context.Context, c *redis.Client) (CommandStats, error) {
	s, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return CommandStats{}, err
	}
	out := CommandStats{calls: map[string]int64{}, usec: map[string]float64{}}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				sec, _ := strconv.ParseFloat(v, 64)
				out.cpu += sec * 1e6
			}
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|")
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				n, _ := strconv.ParseInt(v, 10, 64)
				out.calls[name] += n
			case "usec":
				us, _ := strconv.ParseFloat(v, 64)
				out.usec[name] += us
			}
		}
	}
	return out, nil
}

// Since returns what the server spent between before and s, less the
// commands that read the statistics. sent holds the commands clients sent
// in that time, by lower-case name ([CommandCounter.Since]); with it nil,
// TopCalls and TopMicros stay zero. A command both sent and run by scripts
// (a SET, say) has its time shared by its calls: the sent ones are
// counted at the command's mean time.
func (s CommandStats) Since(before CommandStats, sent map[string]int64) ServerCost {
	var out ServerCost
	out.CPUMicros = s.cpu - before.cpu
	for name, n := range s.calls {
		if measuring[name] {
			continue
		}
		calls := n - before.calls[name]
		us := s.usec[name] - before.usec[name]
		out.Calls += calls
		out.Micros += us
		if calls <= 0 || sent == nil {
			continue
		}
		top := min(sent[name], calls)
		out.TopCalls += top
		out.TopMicros += us * float64(top) / float64(calls)
	}
	return out
}

// CommandCounter is a go-redis hook that counts the commands a client
// sends, by lower-case name, pipelined and transactions included. It is
// safe for concurrent use.
type CommandCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

// CountCommands adds a CommandCounter to c and returns it.
func CountCommands(c *redis.Client) *CommandCounter {
	h := &CommandCounter{n: map[string]int64{}}
	c.AddHook(h)
	return h
}

// Counts returns a copy of the counts so far.
func (h *CommandCounter) Counts() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int64, len(h.n))
	for k, v := range h.n {
		out[k] = v
	}
	return out
}

// Since returns the counts sent since before (an earlier Counts).
func (h *CommandCounter) Since(before map[string]int64) map[string]int64 {
	out := h.Counts()
	for k, v := range before {
		out[k] -= v
	}
	return out
}

func (h *CommandCounter) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	inTx := false
	for _, c := range cmds {
		name := strings.ToLower(c.Name())
		switch {
		case name == "multi":
			inTx = true
		case name == "exec":
			inTx = false
		case inTx:
			// EXEC's time covers the commands it runs, as a script's
			// does: counted once, in EXEC.
			continue
		}
		h.n[name]++
	}
}

// DialHook implements redis.Hook.
func (h *CommandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

// RedisServerCost reads INFO commandstats of c's server since its start or
// its last CONFIG RESETSTAT: Calls and Micros summed over every command
// less INFO, and the process's CPU time since its start. Use it
// on a private server (StartRedis), where no other client's commands
// count.
func RedisServerCost(ctx context.Context, c *redis.Client) (ServerCost, error) {
	s, err := ReadCommandStats(ctx, c)
	if err != nil {
		return ServerCost{}, err
	}
	return s.Since(CommandStats{}, nil), nil
}

var counters sync.Map // *redis.Client -> *CommandCounter

// counter returns c's CommandCounter, adding one the first time.
func counter(c *redis.Client) *CommandCounter {
	if h, ok := counters.Load(c); ok {
		return h.(*CommandCounter)
	}
	h, loaded := counters.LoadOrStore(c, &CommandCounter{n: map[string]int64{}})
	if !loaded {
		c.AddHook(h.(*CommandCounter))
	}
	return h.(*CommandCounter)
}

// ReportRedisCost runs body b.N times against a private redis-server's
// client c and reports, per operation, what the server spent (see
// ServerCost): srv-cmds/op, every command scripts' included; srv-us/op,
// commandstats time summed (scripts' commands counted twice: an upper
// bound); srv-top-us/op, the commands c sent, each once (a script with the
// commands it ran); srv-cpu-us/op, the server process's CPU time. They
// depend far less on the machine's load than ns/op. Only c's commands may
// reach the server meanwhile.
func ReportRedisCost(b *testing.B, c *redis.Client, body func()) {
	b.Helper()
	ctx := context.Background()
	h := counter(c)
	before, err := ReadCommandStats(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	sent := h.Counts()
	b.ResetTimer()
	for range b.N {
		body()
	}
	b.StopTimer()
	after, err := ReadCommandStats(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	cost := after.Since(before, h.Since(sent))
	n := float64(b.N)
	b.ReportMetric(float64(cost.Calls)/n, "srv-cmds/op")
	b.ReportMetric(cost.Micros/n, "srv-us/op")
	b.ReportMetric(cost.TopMicros/n, "srv-top-us/op")
	b.ReportMetric(cost.CPUMicros/n, "srv-cpu-us/op")
}
