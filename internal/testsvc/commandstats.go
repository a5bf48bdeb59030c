package testsvc

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ServerCost is what a Redis server spent on commands, from INFO
// commandstats: Calls counts every command, those a Lua script runs
// included, and Micros is their time summed (a script's own entry covers
// the commands it ran, which are counted again under their names, so this
// is an upper bound of the server's time).
type ServerCost struct {
	Calls  int64
	Micros float64
}

// RedisServerCost reads INFO commandstats of c's server, less the INFO call
// itself. Use it on a private server (StartRedis) reset with CONFIG
// RESETSTAT, where no other client's commands count.
func RedisServerCost(ctx context.Context, c *redis.Client) (ServerCost, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return ServerCost{}, err
	}
	var out ServerCost
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				n, _ := strconv.ParseInt(v, 10, 64)
				out.Calls += n
			case "usec":
				us, _ := strconv.ParseFloat(v, 64)
				out.Micros += us
			}
		}
	}
	return out, nil
}

// ReportRedisCost runs body b.N times against a private redis-server's
// client c, after resetting its statistics, and reports the server's
// commands and microseconds per operation (srv-cmds/op, srv-us/op). They
// do not depend on the machine's load, unlike ns/op.
func ReportRedisCost(b *testing.B, c *redis.Client, body func()) {
	b.Helper()
	ctx := context.Background()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		body()
	}
	b.StopTimer()
	cost, err := RedisServerCost(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cost.Calls)/float64(b.N), "srv-cmds/op")
	b.ReportMetric(cost.Micros/float64(b.N), "srv-us/op")
}
