package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// envBackendPassword is read for the backend's password when the URL names
// none, as --password-file is.
const envBackendPassword = "LATCHKEY_BACKEND_PASSWORD"

// errBackendFlags is a bad combination or file of the backend flags.
var errBackendFlags = errors.New("backend flags")

// backendFlag defines a command's --backend (default $LATCHKEY_BACKEND, else
// latchkey run's SQLite file), with --backend-file and --password-file,
// which keep a password out of the process list, where every user of the
// host can read an argument for as long as the command runs.
func backendFlag(fs *flag.FlagSet, usage string) *string {
	b := new(string)
	backendFlagVar(fs, b, usage)
	return b
}

// backendFlagVar is backendFlag storing --backend in p.
func backendFlagVar(fs *flag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "backend", defaultRunBackend(), usage+" ($"+envBackend+")")
	fs.String("backend-file", "", "read the backend URL from the first line of this `file` instead of --backend")
	fs.String("password-file", "", "read the backend's password from this `file` ($"+envBackendPassword+"), for a URL without one")
}

// settleBackend resolves the backend flags of fs, once parsed, into
// --backend: the URL from --backend-file, the password from --password-file
// or $LATCHKEY_BACKEND_PASSWORD. It warns on stderr when the password came
// in the --backend argument. A command without the flags is left alone.
func settleBackend(fs *flag.FlagSet, stderr io.Writer) error {
	file := fs.Lookup("backend-file")
	if file == nil {
		return nil
	}
	backend := fs.Lookup("backend")
	switch {
	case flagSet(fs, "backend") && flagSet(fs, "backend-file"):
		return fmt.Errorf("%w: give --backend or --backend-file, not both", errBackendFlags)
	case flagSet(fs, "backend-file"):
		raw, err := firstLine(file.Value.String())
		if err != nil {
			return fmt.Errorf("%w: --backend-file: %w", errBackendFlags, err)
		}
		if err := fs.Set("backend", raw); err != nil {
			return err
		}
	case flagSet(fs, "backend") && lockurl.Redact(backend.Value.String()) != backend.Value.String():
		fmt.Fprintf(stderr, "%s: warning: the password in --backend is visible to every user of this host in the process list; "+
			"use $%s, --backend-file or --password-file\n", fs.Name(), envBackend)
	}
	password, from, err := backendPassword(fs)
	if err != nil || password == "" {
		return err
	}
	raw, err := withPassword(backend.Value.String(), password, from)
	if err != nil {
		return err
	}
	return backend.Value.Set(raw)
}

// backendPassword returns the password --password-file or the environment
// gives, and where it came from.
func backendPassword(fs *flag.FlagSet) (password, from string, err error) {
	if flagSet(fs, "password-file") {
		name := fs.Lookup("password-file").Value.String()
		p, err := firstLine(name)
		if err != nil {
			return "", "", fmt.Errorf("%w: --password-file: %w", errBackendFlags, err)
		}
		return p, "--password-file", nil
	}
	return os.Getenv(envBackendPassword), "$" + envBackendPassword, nil
}

// withPassword returns rawURL with password as its userinfo password. A
// URL that has one already, or whose scheme takes none, is refused.
func withPassword(rawURL, password, from string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: %s names a password, but the backend URL does not parse", errBackendFlags, from)
	}
	switch {
	case u.Scheme == "sqlite" || u.Scheme == "mem":
		return "", fmt.Errorf("%w: %s names a password, but a %s:// backend takes none", errBackendFlags, from, u.Scheme)
	case lockurl.Redact(rawURL) != rawURL:
		return "", fmt.Errorf("%w: the backend URL has a password and so does %s: give one", errBackendFlags, from)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String(), nil
}

// firstLine returns the first line of a file, without surrounding space:
// the way a secret is kept in a file (a Kubernetes secret, a systemd
// credential), with or without a final newline.
func firstLine(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("%s: the first line is empty", name)
	}
	return line, nil
}
