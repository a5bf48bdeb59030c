package demo

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
)

// page is the HTML report: one self-contained page, styles inline, no
// script and nothing fetched.
//
//go:embed page.html
var page string

// shapes are the marks' drawings, by class, centred on the step.
var shapes = map[string]template.HTML{
	"applied":  `<circle r="5"/>`,
	"refused":  `<path d="M-5 -5L5 5M5 -5L-5 5"/>`,
	"charged":  `<rect x="-4.5" y="-4.5" width="9" height="9" transform="rotate(45)"/>`,
	"absorbed": `<circle r="5"/>`,
	"killed":   `<path d="M-7 -7L7 7M7 -7L-7 7"/>`,
	"failed":   `<circle r="4.5"/>`,
	"minor":    `<circle r="2.5"/>`,
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"shape": func(class string) template.HTML { return shapes[class] },
	"sub":   func(a, b int) int { return a - b },
}).Parse(page))

// htmlScenario is what the page shows of one scenario.
type htmlScenario struct {
	*Result
	N                  int
	Unguarded, Guarded picture
	UnguardedSteps     []step
	GuardedSteps       []step
}

// WriteHTML writes the report as one HTML page: for each scenario a
// timeline of each run as a picture (a lane per actor, the locks held with
// their tokens, each write applied or refused, each pause and kill), the
// run without its guard beside the run with it.
func (r *Report) WriteHTML(w io.Writer) error {
	view := struct {
		*Report
		Scenarios []htmlScenario
		Legend    any
	}{Report: r, Legend: legend}
	for i, s := range r.Scenarios {
		end := int64(0)
		for _, st := range append(s.Timeline.Unguarded, s.Timeline.Guarded...) {
			end = max(end, st.AtMS)
		}
		view.Scenarios = append(view.Scenarios, htmlScenario{Result: s, N: i + 1,
			Unguarded: draw(s.Timeline.Unguarded, end), Guarded: draw(s.Timeline.Guarded, end),
			UnguardedSteps: s.Timeline.Unguarded, GuardedSteps: s.Timeline.Guarded})
	}
	if err := pageTemplate.Execute(w, view); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	return nil
}

// legend is what each mark means, in the order the page's key shows them.
var legend = []struct{ Class, Label string }{
	{"applied", "a write applied, a message processed, an item sold"},
	{"refused", "a write refused (a stale token, a moved version), sold out"},
	{"charged", "a card charged"},
	{"absorbed", "a duplicate absorbed (a replay, a 409, a message seen)"},
	{"killed", "SIGKILL"},
	{"failed", "a failure, a timeout, a lease lost"},
	{"minor", "another step (sent, read, acquired, released)"},
}
