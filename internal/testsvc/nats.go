package testsvc

import (
	"bufio"
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// EnvNATSURL overrides the URL of the shared NATS server (with JetStream).
const EnvNATSURL = "LATCHKEY_NATS_URL"

// DefaultNATSURL is the shared NATS server used when EnvNATSURL is unset.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// NATSURL returns the URL of the shared NATS server (LATCHKEY_NATS_URL,
// default nats://127.0.0.1:4222) after checking that it greets a TCP
// connection with INFO within 2 s; it calls Unavailable when it does not.
// Whether JetStream is enabled is left to the test to find out.
func NATSURL(t testing.TB) string {
	t.Helper()
	raw := cmp.Or(os.Getenv(EnvNATSURL), DefaultNATSURL)
	addr := raw
	if strings.Contains(raw, "://") {
		u, err := url.Parse(strings.Split(raw, ",")[0])
		if err != nil || u.Host == "" {
			t.Fatalf("testsvc: %s=%q is not a nats:// URL", EnvNATSURL, raw)
		}
		addr = u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "4222")
		}
	}
	if err := greetNATS(addr, checkTimeout); err != nil {
		Unavailable(t, "testsvc: nats at %s: %v", addr, err)
	}
	return raw
}

// greetNATS expects the INFO line a NATS server sends on connect.
func greetNATS(addr string, timeout time.Duration) error {
	c, err := dialChecked(addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading INFO: %w", err)
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("greeting %q is not INFO", strings.TrimSpace(line))
	}
	return nil
}
