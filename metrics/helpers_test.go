package metrics

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// registered returns a collector made by newCollector with no options,
// registered in a new pedantic registry, and the registry.
func registered[C prometheus.Collector](t *testing.T, newCollector func(...Option) (C, error)) (C, *prometheus.Registry) {
	t.Helper()
	c, err := newCollector()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return c, reg
}

// gatherText returns reg's metrics in the text exposition format.
func gatherText(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	b, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
