// Package backendurl holds what the URL openers (lock/lockurl, idem/idemurl)
// share: hiding a URL's passwords from messages, and reading the parts of
// sqlite:// and redis-cluster:// URLs that no driver parses for us.
package backendurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Redact returns rawURL with its passwords (the userinfo password and any
// password or sslpassword query parameter) replaced by "xxxxx", for logs and
// messages. A string that does not parse as a URL is returned with everything
// between "://" and the last "@" of its authority masked.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		scheme, rest, ok := strings.Cut(rawURL, "://")
		if !ok {
			return rawURL
		}
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			return scheme + "://xxxxx" + rest[at:]
		}
		return rawURL
	}
	changed := false
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		changed = true
	}
	if u.Opaque == "" && u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if k == "password" || k == "sslpassword" {
				q[k] = []string{"xxxxx"}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return rawURL // as given: String would drop the "//" of "mem://"
	}
	return u.String()
}

// ParseError is url.Parse's reason for refusing rawURL, without the
// *url.Error wrapper that repeats the whole URL, password included.
func ParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// A Scrubber removes a URL's secrets from error messages that a driver may
// have built from it.
type Scrubber struct{ secrets []string }

// NewScrubber returns a Scrubber for the secrets of rawURL.
func NewScrubber(rawURL string) Scrubber {
	var s Scrubber
	add := func(v string) {
		if len(v) >= 3 { // shorter strings would mangle unrelated text
			s.secrets = append(s.secrets, v)
			if esc := url.QueryEscape(v); esc != v {
				s.secrets = append(s.secrets, esc)
			}
		}
	}
	if u, err := url.Parse(rawURL); err == nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
		q := u.Query()
		add(q.Get("password"))
		add(q.Get("sslpassword"))
	} else if _, rest, ok := strings.Cut(rawURL, "://"); ok {
		// Unparseable: treat the whole userinfo as secret.
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
			}
			add(rest[:at])
		}
	}
	return s
}

// Wrap returns err with every secret in its message replaced by "xxxxx"; the
// chain stays visible to errors.Is and errors.As.
func (s Scrubber) Wrap(err error) error {
	if err == nil || len(s.secrets) == 0 {
		return err
	}
	msg := err.Error()
	for _, v := range s.secrets {
		msg = strings.ReplaceAll(msg, v, "xxxxx")
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubbedError keeps the wrapped chain for errors.Is and errors.As but shows
// a message without secrets.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// SQLitePath returns the file a sqlite:///abs/path or sqlite:rel/path URL
// names.
func SQLitePath(u *url.URL) (string, error) {
	if u.Opaque != "" { // sqlite:rel/path
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", fmt.Errorf("sqlite path: %w", err)
		}
		return p, nil
	}
	if u.Host != "" {
		return "", fmt.Errorf("sqlite URL has host %q; write sqlite:///absolute/path or sqlite:relative/path",
			u.Host)
	}
	if u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return "", errors.New("sqlite URL names no file; write sqlite:///absolute/path or sqlite:relative/path")
	}
	return u.Path, nil
}

// SQLiteDSN returns the modernc.org/sqlite data source name for the database
// file at path: a 10 s busy timeout, WAL journal and synchronous=NORMAL, so
// several processes can share the file.
func SQLiteDSN(path string) string {
	// The driver opens "file:" names as SQLite URIs, which percent-decode the
	// path and end it at '?' or '#'.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

// ClusterOptions reads redis-cluster://[user:pass@]host1:port1,host2:port2[?opts],
// a Redis Cluster reached through any of the listed nodes, with the options
// redis.ParseClusterURL knows and the TLS files of RedisOptions.
func ClusterOptions(rawURL string) (*redis.ClusterOptions, error) {
	raw, cfg, err := TakeTLS(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis-cluster URL: %w", err)
	}
	opt, err := clusterOptions(raw)
	if err != nil {
		return nil, err
	}
	opt.TLSConfig = mergeTLS(opt.TLSConfig, cfg)
	return opt, nil
}

func clusterOptions(raw string) (*redis.ClusterOptions, error) {
	// redis.ParseClusterURL reads redis://host:port?addr=host2:port2; accept
	// the friendlier comma-separated host list too.
	rest := strings.TrimPrefix(raw, "redis-cluster://")
	hosts, query, _ := strings.Cut(rest, "?")
	auth := ""
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		auth, hosts = hosts[:at+1], hosts[at+1:]
	}
	nodes := strings.Split(strings.TrimSuffix(hosts, "/"), ",")
	if len(nodes) == 0 || nodes[0] == "" {
		return nil, errors.New("redis-cluster URL names no node")
	}
	u := "redis://" + auth + nodes[0] + "?"
	for _, n := range nodes[1:] {
		u += "addr=" + url.QueryEscape(n) + "&"
	}
	return redis.ParseClusterURL(strings.TrimSuffix(u+query, "&"))
}
