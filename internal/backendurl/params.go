package backendurl

import (
	"net/url"
	"strings"
)

// CutParams removes the named parameters, which the drivers do not know,
// from raw's query, and returns raw without them and their values; each may
// be given once and not be empty. Its errors wrap invalid (see Invalidf) and
// name the URL as what ("redis URL").
func CutParams(invalid error, what, raw string, names ...string) (string, map[string]string, error) {
	got := map[string]string{}
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, got, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, Invalidf(invalid, "%s parameters: %w", what, err)
	}
	for _, n := range names {
		vs, ok := q[n]
		if !ok {
			continue
		}
		if len(vs) != 1 || vs[0] == "" {
			return "", nil, Invalidf(invalid, "%s: %s must be given once and not be empty", what, n)
		}
		got[n] = vs[0]
		delete(q, n)
	}
	if len(q) == 0 {
		return base, got, nil
	}
	return base + "?" + q.Encode(), got, nil
}
