package backendurl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The query parameters that name TLS files, as etcdctl names its flags:
// the CA that signs the servers' certificates, and the client's own
// certificate and key for servers that ask for one.
const (
	ParamCACert = "cacert"
	ParamCert   = "cert"
	ParamKey    = "key"
)

// TakeTLS removes cacert=, cert= and key= from rawURL's query and returns
// the URL without them and the TLS configuration they name: nil when they
// name nothing. A CA replaces the system's roots; cert and key go together.
func TakeTLS(rawURL string) (string, *tls.Config, error) {
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return rawURL, nil, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, errors.New("the query does not parse")
	}
	files := map[string]string{}
	for _, k := range []string{ParamCACert, ParamCert, ParamKey} {
		if v, ok := q[k]; ok {
			if len(v) != 1 || v[0] == "" {
				return "", nil, fmt.Errorf("%s= wants one file", k)
			}
			files[k] = v[0]
			delete(q, k)
		}
	}
	if len(files) == 0 {
		return rawURL, nil, nil
	}
	cfg, err := tlsFiles(files[ParamCACert], files[ParamCert], files[ParamKey])
	if err != nil {
		return "", nil, err
	}
	if rest := q.Encode(); rest != "" {
		return base + "?" + rest, cfg, nil
	}
	return base, cfg, nil
}

func tlsFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cacert: %s holds no PEM certificate", caFile)
		}
	}
	switch {
	case (certFile == "") != (keyFile == ""):
		return nil, errors.New("cert= and key= go together: the client certificate and its key")
	case certFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("cert, key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// probeTimeout bounds ProbeTLS's handshake with one server.
const probeTimeout = 3 * time.Second

// ProbeTLS makes a TLS handshake with each of addrs in turn until one
// succeeds, so that a wrong CA, an expired certificate or a missing client
// certificate is told at once and in its own words, not as a client
// library's timeout after its retries. It returns the first server's error
// when none succeeds.
func ProbeTLS(ctx context.Context, addrs []string, cfg *tls.Config) error {
	var first error
	for _, addr := range addrs {
		err := probe(ctx, addr, cfg)
		if err == nil {
			return nil
		}
		if first == nil {
			first = fmt.Errorf("TLS with %s: %w", addr, err)
		}
	}
	return first
}

func probe(ctx context.Context, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d := &tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// With TLS 1.3 a server refuses the client's certificate after the
	// client's side of the handshake: its alert is the first thing read. A
	// server that accepted it says nothing until the client speaks.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		if strings.Contains(err.Error(), "remote error: tls:") && strings.Contains(err.Error(), "certificate") {
			return fmt.Errorf("%w: the server refused this client's certificate, or its lack of one: "+
				"give cert= and key= of a certificate signed by a CA the server trusts", err)
		}
		return err
	}
	return nil
}

// RedisOptions reads a redis:// or rediss:// URL as redis.ParseURL does,
// plus the TLS files cacert=, cert= and key=, which turn TLS on for
// redis:// too (rediss:// alone verifies against the system's roots).
func RedisOptions(rawURL string) (*redis.Options, error) {
	raw, cfg, err := TakeTLS(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	opt.TLSConfig = mergeTLS(opt.TLSConfig, cfg)
	return opt, nil
}

// mergeTLS adds the files' CA and client certificate to what the scheme
// asked for (rediss:// sets the server name; without one, the TLS dialer
// verifies the name or address dialled).
func mergeTLS(scheme, files *tls.Config) *tls.Config {
	if files == nil {
		return scheme
	}
	if scheme == nil {
		return files
	}
	scheme.RootCAs, scheme.Certificates = files.RootCAs, files.Certificates
	return scheme
}
