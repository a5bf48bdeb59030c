package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// sample is what the benchmark prints: a lock table of ratios and raw
// latencies, a holding summary, and an idempotency table whose ratios sit
// beside raw values and whose bases differ per column.
const sample = `
| | raw go-redis | redislock | latchkey |
|---|---|---|---|
| uncontended, 1 goroutine (pairs/s) | 9.4k | 1.02x | 1.18x |
| contended 16 on 1 key: p99 wait | 21.8 ms | 24.9 ms | 2.7 ms |
| contended: max/min acquisitions per goroutine | 5.65 | 5.90 | 1.00 |
| contended: exclusion violations | 0 | 0 | 0 |

latchkey holding 10000 leases (TTL 30 s, renewed every 10 s) for 11s:
- leases lost: 0

Idempotency, 64 clients, medians of 3 runs of 1s (requests/s; ratio to the guard of the same kind, same run):

| | hand-written guard | idem.Do | guard middleware | idemhttp |
|---|---|---|---|---|
| first requests | 83.1k | 54.7k (0.78x) | 61.2k | 42.8k (0.70x) |
| round trips, first request (1 client) | 1.00 | 2.00 | 1.00 | 2.00 |

Message dedup on Redis, medians of 3 runs of 1s (messages/s; ratio to the first row, same run):

| messages/s | 1 consumer | 16 consumers | new messages dropped (all runs) |
|---|---|---|---|
| naive SET NX | 445 | 1.4k | 0 |
| dedup/redisstore ClaimBatch | 2.1k (3.75x) | 8.1k (6.66x) | 0 |

What a message costs Redis:

| | Redis µs per message | round trips per message |
|---|---|---|
| naive SET NX | 1.2 | 1.00 |
| dedup/redisstore Claim | 4.0 | 1.00 |
`

func TestParseTables(t *testing.T) {
	tables := parseTables(sample)
	if len(tables) != 3 { // the cost table compares measures, not implementations: no chart
		t.Fatalf("%d tables, want 3", len(tables))
	}
	// Rows compared with the first row: the ratios sit in every column.
	if dd := tables[2]; dd.title != "Message dedup on Redis, medians of 3 runs of 1s — messages/s" ||
		strings.Join(dd.series, ",") != "1 consumer,16 consumers" || len(dd.rows) != 1 || dd.rows[0].ratios[0] != 3.75 {
		t.Errorf("dedup table: %q %q %+v", dd.title, dd.series, dd.rows)
	}
	lk := tables[0]
	if lk.title != "Locks on one Redis" || strings.Join(lk.series, ",") != "redislock,latchkey" {
		t.Fatalf("lock table: %q %q", lk.title, lk.series)
	}
	if len(lk.rows) != 3 { // violations are left out
		t.Fatalf("lock rows: %+v", lk.rows)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if r := lk.rows[0]; r.lowerBetter || !near(r.ratios[0], 1.02) || !near(r.ratios[1], 1.18) {
		t.Errorf("pairs/s row: %+v", r)
	}
	if r := lk.rows[1]; !r.lowerBetter || !near(r.ratios[1], 2.7/21.8) {
		t.Errorf("p99 row: %+v", r)
	}
	im := tables[1]
	if im.title != "Idempotency, 64 clients, medians of 3 runs of 1s" {
		t.Errorf("idem title %q", im.title)
	}
	// Only the stated ratios are drawn: the guard middleware is a base, and
	// the round-trip row has no stated ratio.
	if strings.Join(im.series, ",") != "idem.Do,idemhttp" || len(im.rows) != 1 || !near(im.rows[0].ratios[1], 0.70) {
		t.Errorf("idem table: %q %+v", im.series, im.rows)
	}
}

func TestRenderSVG(t *testing.T) {
	svg := renderSVG(parseTables(sample))
	dec := xml.NewDecoder(bytes.NewReader(svg))
	bars := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "height" && a.Value == "11" { // bars; swatches are 12 high, the background 100%
					bars++
				}
			}
		}
	}
	if want := 3*2 + 2 + 2; bars != want {
		t.Errorf("%d bars, want %d", bars, want)
	}
	for _, s := range []string{"prefers-color-scheme: dark", "0.12x", "0.70x", "Idempotency, 64 clients"} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("chart lacks %q", s)
		}
	}
}
