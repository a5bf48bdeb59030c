package backendurl

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// An Opener opens one scheme. raw is the URL as given (for drivers that parse
// it themselves); u is its parsed form.
type Opener[T any] func(ctx context.Context, raw string, u *url.URL) (T, error)

// Schemes is a package's table of openers by URL scheme, with what its
// errors say: Pkg prefixes messages ("lockurl"), Invalid is the sentinel a
// bad URL matches with errors.Is, Unsupported the one an unknown scheme
// wraps.
type Schemes[T any] struct {
	Pkg         string
	Invalid     error
	Unsupported error
	Openers     map[string]Opener[T]
}

// Names returns the schemes, sorted.
func (s Schemes[T]) Names() []string {
	names := make([]string, 0, len(s.Openers))
	for k := range s.Openers {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Open parses rawURL and calls its scheme's opener. Errors never contain the
// URL's passwords: a URL that cannot be parsed, has no scheme or an unknown
// one matches s.Invalid (the last also wraps s.Unsupported); the opener's
// error is wrapped with the redacted URL.
func (s Schemes[T]) Open(ctx context.Context, rawURL string) (T, error) {
	var zero T
	sc := NewScrubber(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return zero, sc.Wrap(Invalidf(s.Invalid, "%s: cannot parse %q: %w", s.Pkg, Redact(rawURL), ParseError(err)))
	}
	if u.Scheme == "" {
		return zero, sc.Wrap(Invalidf(s.Invalid, "%s: %q has no scheme; %s", s.Pkg, Redact(rawURL), s.supported()))
	}
	open, ok := s.Openers[u.Scheme]
	if !ok {
		return zero, sc.Wrap(Invalidf(s.Invalid, "%w %q in %q; %s", s.Unsupported, u.Scheme, Redact(rawURL), s.supported()))
	}
	v, err := open(ctx, rawURL, u)
	if err != nil {
		return zero, sc.Wrap(fmt.Errorf("%s: %s: %w", s.Pkg, Redact(rawURL), err))
	}
	return v, nil
}

func (s Schemes[T]) supported() string {
	return "supported: " + strings.Join(s.Names(), "://, ") + "://"
}

// Invalidf returns an error that matches sentinel with errors.Is and reads
// as the formatted message alone, without the sentinel's own text.
func Invalidf(sentinel error, format string, args ...any) error {
	return &invalidError{fmt.Errorf(format, args...), sentinel}
}

type invalidError struct {
	err      error
	sentinel error
}

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == e.sentinel }
