package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// envArtifacts names the directory where tests keep what a person may want
// to look at afterwards (the demo's screenshot); a temporary one when unset.
const envArtifacts = "LATCHKEY_ARTIFACTS"

// drawn is what the page's pictures hold, measured by the browser that laid
// them out.
type drawn struct {
	Fetched   int             `json:"fetched"` // resources the page loaded
	Height    int             `json:"height"`
	Scenarios []drawnScenario `json:"scenarios"`
}

type drawnScenario struct {
	Name string     `json:"name"`
	Runs []drawnRun `json:"runs"`
}

type drawnRun struct {
	Run       string   `json:"run"`
	Lanes     []string `json:"lanes"`
	Tokens    []string `json:"tokens"`  // of the holds drawn
	Refused   []string `json:"refused"` // the lanes of refused writes
	Killed    []string `json:"killed"`
	Paused    []string `json:"paused"`
	Marks     int      `json:"marks"`
	Invisible []string `json:"invisible"` // drawn with no size, or outside the picture
}

// measure collects, for every picture, its lanes and marks as laid out: an
// element counts as drawn when its box has a size and lies inside its svg.
const measure = `
const inside = (el, svg) => {
  const r = el.getBoundingClientRect(), s = svg.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && r.left >= s.left - 1 && r.right <= s.right + 1 &&
    r.top >= s.top - 1 && r.bottom <= s.bottom + 1;
};
const actors = (svg, sel) => [...svg.querySelectorAll(sel)].map(e => e.dataset.actor);
return {
  fetched: performance.getEntriesByType("resource").length,
  height: document.documentElement.scrollHeight,
  scenarios: [...document.querySelectorAll("section.scenario")].map(sec => ({
    name: sec.dataset.scenario,
    runs: [...sec.querySelectorAll("figure.run")].map(fig => {
      const svg = fig.querySelector("svg.timeline");
      const all = [...svg.querySelectorAll("g.lane text, g.hold rect, rect.paused, g.mark")];
      return {
        run: fig.dataset.run,
        lanes: actors(svg, "g.lane"),
        tokens: [...svg.querySelectorAll("g.hold")].map(e => e.dataset.token),
        refused: actors(svg, "g.mark.refused"),
        killed: actors(svg, "g.mark.killed"),
        paused: actors(svg, "rect.paused"),
        marks: svg.querySelectorAll("g.mark").length,
        invisible: all.filter(e => !inside(e, svg)).map(e => e.outerHTML.slice(0, 120)),
      };
    }),
  })),
};`

// latchkey demo --html draws every scenario's runs, and a real browser
// shows what the page promises: a lane per instance, the locks held with
// their tokens, the paused holder's refused write on its own lane, the
// killed holder, all inside their pictures, nothing fetched from anywhere.
func TestDemoHTMLInABrowser(t *testing.T) {
	browser := testsvc.StartBrowser(t)
	page := filepath.Join(t.TempDir(), "demo.html")
	code, out, errOut := latchkey(t, "demo", "--html", page)
	if code != exitOK {
		t.Fatalf("demo --html: exit status %d; stderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	if !strings.Contains(errOut, page) {
		t.Errorf("demo --html does not say where the page is: %q", errOut)
	}
	browser.Open("file://" + page)
	var d drawn
	browser.Eval(&d, measure)

	if d.Fetched != 0 {
		t.Errorf("the page fetched %d resources; it must be self-contained", d.Fetched)
	}
	runs := drawnRuns(t, d)
	checkPausedHolder(t, runs["paused-holder/guarded"])
	// The killed holder, in both runs; a refused try after it in the guarded one.
	for _, run := range []string{"unguarded", "guarded"} {
		if r := runs["forgot-to-unlock/"+run]; len(r.Killed) != 1 {
			t.Errorf("forgot-to-unlock, %s: killed marks on %v, want one", run, r.Killed)
		}
	}
	if r := runs["forgot-to-unlock/guarded"]; len(r.Refused) == 0 {
		t.Errorf("forgot-to-unlock, guarded: no refused try drawn")
	}
	keepScreenshot(t, browser, d.Height)
}

// drawnRuns checks that every scenario was drawn, unguarded beside guarded,
// with lanes and marks inside the pictures, and returns the runs by
// "scenario/run".
func drawnRuns(t *testing.T, d drawn) map[string]drawnRun {
	t.Helper()
	var names []string
	for _, s := range d.Scenarios {
		names = append(names, s.Name)
	}
	if want := []string{"payment", "failed-handler", "transfers", "last-item", "paused-holder", "forgot-to-unlock"}; !slices.Equal(names, want) {
		t.Fatalf("scenarios drawn: %v, want %v", names, want)
	}
	runs := map[string]drawnRun{}
	for _, s := range d.Scenarios {
		if len(s.Runs) != 2 || s.Runs[0].Run != "unguarded" || s.Runs[1].Run != "guarded" {
			t.Errorf("%s: runs %+v, want unguarded beside guarded", s.Name, s.Runs)
			continue
		}
		for _, r := range s.Runs {
			runs[s.Name+"/"+r.Run] = r
			if len(r.Lanes) < 2 || r.Marks == 0 {
				t.Errorf("%s, %s: %d lanes and %d marks drawn", s.Name, r.Run, len(r.Lanes), r.Marks)
			}
			if len(r.Invisible) > 0 {
				t.Errorf("%s, %s: drawn with no size or outside the picture: %q", s.Name, r.Run, r.Invisible)
			}
		}
	}
	return runs
}

// checkPausedHolder: the holder frozen on its own lane, then its stale write
// refused there, while the successor's lock (a higher token) is drawn too.
func checkPausedHolder(t *testing.T, r drawnRun) {
	t.Helper()
	if len(r.Paused) != 1 || !slices.Contains(r.Lanes, r.Paused[0]) {
		t.Errorf("paused-holder, guarded: frozen lanes %v of lanes %v", r.Paused, r.Lanes)
	} else if !slices.Contains(r.Refused, r.Paused[0]) {
		t.Errorf("paused-holder, guarded: refused writes on %v, want one on the frozen %s", r.Refused, r.Paused[0])
	}
	if tokens := slices.Compact(slices.Sorted(slices.Values(r.Tokens))); len(tokens) < 2 {
		t.Errorf("paused-holder, guarded: tokens drawn %v, want the frozen holder's and its successor's", r.Tokens)
	}
}

// keepScreenshot saves the whole page, as drawn, in the artifacts directory.
func keepScreenshot(t *testing.T, browser *testsvc.Browser, height int) {
	t.Helper()
	dir := os.Getenv(envArtifacts)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "latchkey-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	browser.Resize(1300, min(height+40, 6000))
	shot := filepath.Join(dir, "demo.png")
	browser.Screenshot(shot)
	t.Logf("the demo's pictures, as Chromium drew them: %s", shot)
}
