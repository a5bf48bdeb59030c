package demo

import (
	"bytes"
	"strings"
	"testing"
)

func TestAxisIsRound(t *testing.T) {
	for _, tc := range []struct {
		end, span, step int64
	}{{0, 1, 1}, {1, 1, 1}, {7, 8, 2}, {206, 250, 50}, {1018, 1200, 200}, {2038, 2500, 500}, {9999, 10000, 2000}} {
		span, ticks := axis(tc.end)
		if span != tc.span || len(ticks) < 2 || ticks[1]-ticks[0] != tc.step || ticks[len(ticks)-1] != span {
			t.Errorf("axis(%d) = %d, %v; want span %d in steps of %d", tc.end, span, ticks, tc.span, tc.step)
		}
		if len(ticks) > 7 {
			t.Errorf("axis(%d): %d ticks", tc.end, len(ticks))
		}
	}
}

// A paused holder's run: its lock from acquisition to the refused write's
// release, the freeze on its own lane (not the demo's, which only sent the
// signals), the refused write there too, and the successor's lock.
func TestDrawPutsSignalsOnTheirWorkersLane(t *testing.T) {
	steps := []step{
		{AtMS: 4, Actor: "instance 1", Kind: kindAcquired, Token: 1796244285643000},
		{AtMS: 4, Actor: "demo", Kind: kindPaused, On: "instance 1"},
		{AtMS: 1010, Actor: "instance 2", Kind: kindAcquired, Token: 1796244286650000},
		{AtMS: 1010, Actor: "demo", Kind: kindResumed, On: "instance 1"},
		{AtMS: 1011, Actor: "instance 1", Kind: kindRefused, Token: 1796244285643000},
		{AtMS: 1011, Actor: "instance 1", Kind: kindReleased},
		{AtMS: 1017, Actor: "instance 2", Kind: kindApplied},
		{AtMS: 1030, Actor: "demo", Kind: kindKilled, On: "instance 2"},
	}
	p := draw(steps, 1030)
	if len(p.Lanes) != 2 || p.Lanes[0].Name != "instance 1" || p.Lanes[1].Name != "instance 2" {
		t.Fatalf("lanes %+v, want instance 1 and instance 2 only", p.Lanes)
	}
	first, second := p.Lanes[0].Y, p.Lanes[1].Y
	if len(p.Pauses) != 1 || p.Pauses[0].Y != first || p.Pauses[0].Actor != "instance 1" {
		t.Errorf("pauses %+v, want one on instance 1's lane", p.Pauses)
	}
	killedAt := checkMarks(t, p, first, second)
	if len(p.Holds) != 2 {
		t.Fatalf("holds %+v, want two", p.Holds)
	}
	if h := p.Holds[0]; h.Actor != "instance 1" || h.Y != first || h.Token != "…643000" || h.W <= 0 {
		t.Errorf("instance 1's hold %+v", h)
	}
	if h := p.Holds[1]; h.Actor != "instance 2" || h.Y != second || h.FullToken != 1796244286650000 || h.X+h.W != killedAt {
		t.Errorf("instance 2's hold %+v, want it to end at the kill, x=%v", h, killedAt)
	}
}

// checkMarks: the refused write on the frozen holder's lane, the kill on
// the killed one's, every mark on the axis; it returns where the kill is.
func checkMarks(t *testing.T, p picture, frozen, killed int) (killedAt float64) {
	t.Helper()
	classes := map[string]int{}
	for _, m := range p.Marks {
		classes[m.Class]++
		switch {
		case m.Class == "refused" && m.Y != frozen:
			t.Errorf("the refused write is on lane y=%d, not the frozen holder's (%d)", m.Y, frozen)
		case m.Class == "killed" && m.Y != killed:
			t.Errorf("the kill is on lane y=%d, not the killed holder's (%d)", m.Y, killed)
		case m.Class == "killed":
			killedAt = m.X
		}
		if m.X < float64(p.PlotX) || m.X > float64(p.PlotEnd) {
			t.Errorf("mark %+v outside the axis [%d, %d]", m, p.PlotX, p.PlotEnd)
		}
	}
	if classes["refused"] != 1 || classes["applied"] != 1 || classes["killed"] != 1 {
		t.Errorf("marks by class %v", classes)
	}
	return killedAt
}

// What the workers said reaches the page as text, never as markup.
func TestWriteHTMLEscapes(t *testing.T) {
	r := &Report{OK: true, Backend: "sqlite:///tmp/x.db", Scenarios: []*Result{{
		Name: "payment", Title: "<b>t</b>", Guard: "g", Why: "w",
		Damage:   damage{Unit: "extra charges", Unguarded: 1},
		Timeline: timelines{Unguarded: []step{{AtMS: 1, Actor: "<script>alert(1)</script>", Kind: kindSent, Event: `"><img src=x>`}}},
	}}}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"<script>alert", "<img src=x>", "<b>t</b>"} {
		if strings.Contains(out, bad) {
			t.Errorf("the page carries %q as markup", bad)
		}
	}
	if !strings.Contains(out, `<svg class="timeline"`) || !strings.Contains(out, "Without the guard: 1 extra charges") {
		t.Errorf("the page lacks the unguarded run's picture:\n%s", out)
	}
}
