package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The benchmark prints its results to stdout as Markdown: a line of context,
// then a table whose first column after the labels is the baseline and whose
// other cells are ratios to it ("1.58x"), ratios beside raw values
// ("54.7k (0.78x)"), or raw values in the baseline's unit ("2.7 ms"). The
// chart is drawn from that text, so every table the benchmark prints is
// charted without the measuring code knowing about charts, and a saved
// results file can be charted again (-chart-from).

// capture copies everything written to os.Stdout into a buffer while still
// printing it.
type capture struct {
	real *os.File
	w    *os.File
	buf  bytes.Buffer
	wg   sync.WaitGroup
}

// captureStdout starts capturing os.Stdout.
func captureStdout() (*capture, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &capture{real: os.Stdout, w: w}
	os.Stdout = w
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_, _ = io.Copy(io.MultiWriter(c.real, &c.buf), r)
		r.Close()
	}()
	return c, nil
}

// finish stops capturing and writes the captured Markdown to mdPath and its
// chart to svgPath (either may be empty to skip it).
func (c *capture) finish(mdPath, svgPath string) error {
	os.Stdout = c.real
	c.w.Close()
	c.wg.Wait()
	return writeResults(c.buf.String(), mdPath, svgPath)
}

// chartFrom draws the chart of a results file written earlier with -md.
func chartFrom(mdPath, svgPath string) error {
	md, err := os.ReadFile(mdPath)
	if err != nil {
		return err
	}
	return writeResults(string(md), "", svgPath)
}

// writeResults writes md to mdPath and its chart to svgPath.
func writeResults(md, mdPath, svgPath string) error {
	if mdPath != "" {
		if err := os.WriteFile(mdPath, []byte(strings.TrimLeft(md, "\n")), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", mdPath)
	}
	if svgPath != "" {
		tables := parseTables(md)
		if len(tables) == 0 {
			return fmt.Errorf("chart: no result table to draw")
		}
		if err := os.WriteFile(svgPath, renderSVG(tables), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", svgPath)
	}
	return nil
}

// chartTable is one results table reduced to ratios.
type chartTable struct {
	title  string
	note   string   // what the ratios are relative to
	series []string // the columns that have bars (never the baseline)
	rows   []chartRow
}

// chartRow is one measurement: a ratio per series (NaN: no bar).
type chartRow struct {
	label       string
	lowerBetter bool
	ratios      []float64
}

var (
	parenRatio = regexp.MustCompile(`\(([0-9.]+)x\)`)
	bareRatio  = regexp.MustCompile(`^([0-9.]+)x$`)
	rawValue   = regexp.MustCompile(`^([0-9.]+)\s*(k|ms|µs|us|s)?$`)
)

// parseTables finds the Markdown tables in md and turns each into ratios.
func parseTables(md string) []chartTable {
	var (
		out     []chartTable
		context string
		block   [][]string
	)
	flush := func() {
		if t, ok := tableRatios(context, block); ok {
			out = append(out, t)
		}
		block = nil
	}
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "|") {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if len(cells) > 0 && strings.Trim(cells[0], "-: ") == "" && strings.Contains(cells[0], "-") {
				continue // the separator row
			}
			block = append(block, cells)
			continue
		}
		if block != nil {
			flush()
		}
		if line != "" && !strings.HasPrefix(line, "-") {
			context = line
		}
	}
	if block != nil {
		flush()
	}
	return out
}

// tableRatios reduces one table (header first) to ratios.
func tableRatios(context string, block [][]string) (chartTable, bool) {
	if len(block) < 2 || len(block[0]) < 3 {
		return chartTable{}, false
	}
	head := block[0]
	t := chartTable{title: tableTitle(context, head[0])}
	// explicit: the table states its ratios beside raw values, and bases
	// differ per column or row. ratios: some cells are bare ratios, so the
	// first column is the baseline of each row and raw cells in its unit can
	// be compared with it. A table with neither (columns that are different
	// measures) has nothing to chart.
	explicit, ratios := false, false
	for _, r := range block[1:] {
		for _, c := range r {
			explicit = explicit || parenRatio.MatchString(c)
			ratios = ratios || bareRatio.MatchString(c)
		}
	}
	if !explicit && !ratios {
		return chartTable{}, false
	}
	if explicit {
		t.note = "ratios as stated in the table"
	} else {
		t.note = "ratio to " + head[1] + " (the line at 1x)"
	}
	// Bars are drawn for the columns after the baseline; a table that states
	// its ratios may state them in its first column too (rows compared with
	// the first row).
	first := 2
	if explicit {
		first = 1
	}
	cols := len(head) - first
	var rows []chartRow
	has := make([]bool, cols)
	for _, r := range block[1:] {
		if len(r) != len(head) || skipRow(r[0]) {
			continue
		}
		row := chartRow{label: strings.ReplaceAll(r[0], "`", ""), lowerBetter: lowerIsBetter(r[0]), ratios: make([]float64, cols)}
		any := false
		base, baseUnit, baseOK := parseRaw(r[1])
		for j := range cols {
			v := math.NaN()
			cell := r[j+first]
			switch m := parenRatio.FindStringSubmatch(cell); {
			case m != nil:
				v, _ = strconv.ParseFloat(m[1], 64)
			case bareRatio.MatchString(cell):
				v, _ = strconv.ParseFloat(bareRatio.FindStringSubmatch(cell)[1], 64)
			case !explicit && baseOK && base > 0:
				if x, unit, ok := parseRaw(cell); ok && unit == baseUnit {
					v = x / base
				}
			}
			if v > 0 && !math.IsInf(v, 0) {
				row.ratios[j] = v
				has[j] = true
				any = true
			} else {
				row.ratios[j] = math.NaN()
			}
		}
		if any {
			rows = append(rows, row)
		}
	}
	// Keep only the columns that have a bar somewhere.
	var keep []int
	for j := range cols {
		if has[j] {
			keep = append(keep, j)
			t.series = append(t.series, head[j+first])
		}
	}
	for _, r := range rows {
		nr := r
		nr.ratios = nil
		for _, j := range keep {
			nr.ratios = append(nr.ratios, r.ratios[j])
		}
		t.rows = append(t.rows, nr)
	}
	return t, len(t.rows) > 0
}

// tableTitle shortens the line before a table to a title.
func tableTitle(context, corner string) string {
	title := context
	if i := strings.Index(title, " ("); i > 0 {
		title = title[:i]
	}
	if i := strings.Index(title, ";"); i > 0 {
		title = title[:i]
	}
	title = strings.TrimSuffix(title, ":")
	switch {
	case title == "" && corner != "":
		title = corner
	case title == "":
		title = "Locks on one Redis"
	case corner != "":
		title += " — " + corner
	}
	return title
}

// skipRow leaves out rows whose ratio means nothing: counts that should be 0.
func skipRow(label string) bool {
	l := strings.ToLower(label)
	return strings.Contains(l, "violations") || strings.Contains(l, "stalled") || strings.Contains(l, "leases lost")
}

// lowerIsBetter tells latencies, spreads and costs from rates by the row's
// label; rows that name neither are rates.
func lowerIsBetter(label string) bool {
	l := strings.ToLower(label)
	if strings.Contains(l, "/s") {
		return false
	}
	for _, w := range []string{"p99", "wait", "max/min", "round trips", "latency", "memory", "cpu"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// parseRaw reads "9.4k", "21.8 ms", "5.65"; the unit tells incomparable
// cells apart.
func parseRaw(cell string) (float64, string, bool) {
	m := rawValue.FindStringSubmatch(strings.TrimSpace(cell))
	if m == nil {
		return 0, "", false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, "", false
	}
	unit := m[2]
	if unit == "k" {
		v, unit = v*1000, ""
	}
	return v, unit, true
}

// Layout of the chart, in pixels.
const (
	chartWidth = 960
	labelWidth = 400 // the row labels' column
	plotLeft   = labelWidth + 20
	plotRight  = chartWidth - 70 // room for the value beside the longest bar
	barHeight  = 11
	barGap     = 2
	rowGap     = 12
)

// palette is the Okabe-Ito set: distinct for colour-blind readers and
// mid-toned, so bars read on a light and a dark page alike.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999"}

// renderSVG draws each table as a panel of grouped horizontal bars on a
// log2 scale centred on 1x.
func renderSVG(tables []chartTable) []byte {
	lo, hi := -1.0, 1.0 // log2 of the axis ends: at least 0.5x to 2x
	for _, t := range tables {
		for _, r := range t.rows {
			for _, v := range r.ratios {
				if !math.IsNaN(v) {
					lo = math.Min(lo, math.Floor(math.Log2(v)))
					hi = math.Max(hi, math.Ceil(math.Log2(v)))
				}
			}
		}
	}
	lo, hi = math.Max(lo, -6), math.Min(hi, 6)
	x := func(r float64) float64 {
		l := math.Min(math.Max(math.Log2(r), lo), hi)
		return plotLeft + (l-lo)/(hi-lo)*(plotRight-plotLeft)
	}
	colors := map[string]string{}
	color := func(name string) string {
		if c, ok := colors[name]; ok {
			return c
		}
		c := palette[len(colors)%len(palette)]
		colors[name] = c
		return c
	}

	var body strings.Builder
	y := 30.0
	for _, t := range tables {
		y = drawCurve(&body, t, color, y)
	}
	for _, t := range tables {
		fmt.Fprintf(&body, `<text class="fg title" x="10" y="%.0f">%s</text>`+"\n", y, esc(t.title))
		y += 18
		fmt.Fprintf(&body, `<text class="muted" x="10" y="%.0f">%s; ↑ higher is better, ↓ lower is better</text>`+"\n", y, esc(t.note))
		y += 18
		lx := 10.0
		for _, s := range t.series {
			fmt.Fprintf(&body, `<rect x="%.0f" y="%.0f" width="12" height="12" rx="2" fill="%s"/>`, lx, y-10, color(s))
			fmt.Fprintf(&body, `<text class="fg" x="%.0f" y="%.0f">%s</text>`+"\n", lx+17, y, esc(s))
			lx += 17 + 7*float64(len([]rune(s))) + 20
		}
		y += 14
		top := y
		for _, r := range t.rows {
			if m := goroutineRow.FindStringSubmatch(r.label); m != nil && !barGoroutines[m[1]] {
				continue // drawn in the curve above only
			}
			n := 0
			for _, v := range r.ratios {
				if !math.IsNaN(v) {
					n++
				}
			}
			h := float64(n)*(barHeight+barGap) - barGap
			arrow := "↑"
			if r.lowerBetter {
				arrow = "↓"
			}
			fmt.Fprintf(&body, `<text class="fg label" x="%d" y="%.1f" text-anchor="end">%s <tspan class="muted">%s</tspan></text>`+"\n",
				labelWidth, y+h/2+4, esc(shorten(r.label, 54)), arrow)
			by := y
			for j, v := range r.ratios {
				if math.IsNaN(v) {
					continue
				}
				x0, x1 := x(1), x(v)
				if x1 < x0 {
					x0, x1 = x1, x0
				}
				fmt.Fprintf(&body, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`,
					x0, by, math.Max(x1-x0, 1), barHeight, color(t.series[j]), esc(t.series[j]), ratioText(v))
				tx, anchor := x(v)+4, "start"
				if v < 1 {
					tx, anchor = x(v)-4, "end"
				}
				fmt.Fprintf(&body, `<text class="fg small" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`+"\n", tx, by+barHeight-2, anchor, ratioText(v))
				by += barHeight + barGap
			}
			y += h + rowGap
		}
		// Grid lines and the axis, under the panel's rows.
		for e := lo; e <= hi; e++ {
			gx := x(math.Exp2(e))
			cls := "grid"
			if e == 0 {
				cls = "base"
			}
			fmt.Fprintf(&body, `<line class="%s" x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f"/>`, cls, gx, top-6, gx, y-rowGap+4)
			fmt.Fprintf(&body, `<text class="muted small" x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", gx, y+6, tickText(math.Exp2(e)))
		}
		y += 40
	}
	height := y - 10

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="-apple-system,BlinkMacSystemFont,'Segoe UI',Helvetica,Arial,sans-serif" font-size="13">`+"\n",
		chartWidth, height, chartWidth, height)
	b.WriteString(`<style>
.bg { fill: #ffffff; } .fg { fill: #1f2328; } .muted { fill: #59636e; } .title { font-weight: 600; font-size: 15px; } .small { font-size: 11px; } .label { font-size: 12px; }
.grid { stroke: #d1d9e0; stroke-width: 1; } .base { stroke: #59636e; stroke-width: 1.5; }
@media (prefers-color-scheme: dark) {
  .bg { fill: #0d1117; } .fg { fill: #e6edf3; } .muted { fill: #9198a1; } .grid { stroke: #3d444d; } .base { stroke: #9198a1; }
}
</style>
`)
	// An opaque background of its own keeps the text legible when the
	// viewer's colour scheme and the page's theme disagree.
	b.WriteString(`<rect class="bg" x="0" y="0" width="100%" height="100%" rx="6"/>` + "\n")
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// ratioText writes a bar's ratio as the tables do.
func ratioText(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

// tickText writes an axis tick, a power of two: 1/8x, 1x, 16x.
func tickText(v float64) string {
	if v < 1 {
		return fmt.Sprintf("1/%.0fx", 1/v)
	}
	return fmt.Sprintf("%.0fx", v)
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func esc(s string) string { return html.EscapeString(s) }

// barGoroutines are the goroutine counts of the uncontended test that are
// drawn as bars too; the others are in the curve only.
var barGoroutines = map[string]bool{"1": true, "16": true, "64": true}

// goroutineRow matches the rows of the uncontended test, one per goroutine
// count.
var goroutineRow = regexp.MustCompile(`^uncontended, (\d+) goroutines?`)

// drawCurve draws, for a table with three or more rows of the uncontended
// test, each series' ratio against the goroutine count as a line (both
// axes log2), at y; it returns the y below it, or y if t has no such rows.
func drawCurve(body *strings.Builder, t chartTable, color func(string) string, y float64) float64 {
	type point struct {
		g      float64
		ratios []float64
	}
	var pts []point
	for _, r := range t.rows {
		if m := goroutineRow.FindStringSubmatch(r.label); m != nil {
			g, _ := strconv.ParseFloat(m[1], 64)
			pts = append(pts, point{g, r.ratios})
		}
	}
	if len(pts) < 3 {
		return y
	}
	lo, hi := -1.0, 1.0
	for _, p := range pts {
		for _, v := range p.ratios {
			if !math.IsNaN(v) && v > 0 {
				lo, hi = math.Min(lo, math.Floor(math.Log2(v))), math.Max(hi, math.Ceil(math.Log2(v)))
			}
		}
	}
	const plotHeight = 220.0
	gx := func(g float64) float64 {
		return plotLeft + math.Log2(g/pts[0].g)/math.Log2(pts[len(pts)-1].g/pts[0].g)*(plotRight-plotLeft)
	}
	fmt.Fprintf(body, `<text class="fg title" x="10" y="%.0f">%s: pairs/s against goroutines</text>`+"\n", y, esc(t.title))
	y += 18
	fmt.Fprintf(body, `<text class="muted" x="10" y="%.0f">%s, by goroutines each on its own key; ↑ higher is better</text>`+"\n", y, esc(t.note))
	y += 16
	for j, s := range t.series {
		fmt.Fprintf(body, `<rect x="10" y="%.0f" width="12" height="3" fill="%s"/><text class="fg" x="28" y="%.0f">%s</text>`+"\n",
			y+12+float64(j)*18, color(s), y+17+float64(j)*18, esc(s))
	}
	top := y + 8
	ry := func(v float64) float64 { return top + (hi-math.Log2(v))/(hi-lo)*plotHeight }
	for e := lo; e <= hi; e++ {
		cls := "grid"
		if e == 0 {
			cls = "base"
		}
		fmt.Fprintf(body, `<line class="%s" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/><text class="muted small" x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			cls, float64(plotLeft), ry(math.Exp2(e)), float64(plotRight), ry(math.Exp2(e)), float64(plotLeft-6), ry(math.Exp2(e))+4, tickText(math.Exp2(e)))
	}
	for _, p := range pts {
		fmt.Fprintf(body, `<text class="muted small" x="%.1f" y="%.0f" text-anchor="middle">%.0f</text>`+"\n", gx(p.g), top+plotHeight+16, p.g)
	}
	for j, s := range t.series {
		var line []string
		for _, p := range pts {
			if v := p.ratios[j]; !math.IsNaN(v) && v > 0 {
				line = append(line, fmt.Sprintf("%.1f,%.1f", gx(p.g), ry(v)))
				fmt.Fprintf(body, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %.0f goroutines: %s</title></circle>`,
					gx(p.g), ry(v), color(s), esc(s), p.g, ratioText(v))
			}
		}
		fmt.Fprintf(body, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(line, " "), color(s))
	}
	return top + plotHeight + 60
}
