package testsvc

import (
	"cmp"
	"errors"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// EnvAMQPURL overrides the URL of the shared RabbitMQ broker.
const EnvAMQPURL = "LATCHKEY_AMQP_URL"

// DefaultAMQPURL is the shared RabbitMQ used when EnvAMQPURL is unset.
const DefaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/"

// AMQPURL returns the URL of the shared RabbitMQ broker (LATCHKEY_AMQP_URL,
// default amqp://guest:guest@127.0.0.1:5672/) after checking that it answers
// the AMQP 0-9-1 protocol header. It calls Unavailable otherwise.
func AMQPURL(t testing.TB) string {
	t.Helper()
	raw := cmp.Or(os.Getenv(EnvAMQPURL), DefaultAMQPURL)
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		t.Fatalf("testsvc: %s=%q is not an amqp:// URL", EnvAMQPURL, raw)
	}
	addr := u.Host
	if u.Port() == "" {
		port := "5672"
		if u.Scheme == "amqps" {
			port = "5671"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	if err := pingAMQP(addr, checkTimeout); err != nil {
		Unavailable(t, "testsvc: rabbitmq at %s: %v", addr, err)
	}
	return raw
}

// pingAMQP sends the AMQP 0-9-1 protocol header and expects a method frame
// (connection.start) back.
func pingAMQP(addr string, timeout time.Duration) error {
	c, err := dialChecked(addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return err
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return err
	}
	if b[0] != 1 {
		return errors.New("not an AMQP 0-9-1 server")
	}
	return nil
}
