package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The seeds' first experiment: two instances of one service contend for one
// lock. Here they are two processes, each adding 1 to a counter in the SQLite
// file a number of times by reading it, working a little, and writing it back.
const (
	turnsWorkers = 2
	turnsRounds  = 8
	turnsHold    = 15 * time.Millisecond // between read and write
	turnsPause   = 30 * time.Millisecond // between rounds
	turnsTTL     = 5 * time.Second
)

type turnsResult struct {
	Workers          int      `json:"workers"`
	Rounds           int      `json:"rounds_each"`
	Expected         int64    `json:"expected"`
	Counter          int64    `json:"counter"`
	LostUpdates      int64    `json:"lost_updates"`
	Overlaps         int      `json:"overlaps"` // sections of different workers that overlapped in time
	Sections         int      `json:"sections"`
	HandOvers        int      `json:"hand_overs"` // consecutive sections by different workers
	Tokens           []uint64 `json:"tokens,omitempty"`
	TokensIncreasing bool     `json:"tokens_increasing,omitempty"`
	DurationMS       int64    `json:"duration_ms"`
	Damaged          bool     `json:"damaged"`
}

func (d *demo) turns(ctx context.Context) *scenario {
	s := &scenario{
		Name: "two-instances",
		Title: fmt.Sprintf("Two instances, one lock: %d processes each add 1 to a shared counter %d times",
			turnsWorkers, turnsRounds),
		Why: "read-modify-write from two processes loses updates unless a lock makes them take turns",
		OK:  true,
	}
	began := time.Now()
	defer func() { s.DurationMS = ms(time.Since(began)) }()
	if !d.crossProcess() {
		s.Skipped = "the backend is in-process (mem://); its locks cannot reach other processes"
		s.say("skipped: %s", s.Skipped)
		return s
	}
	un, err := d.turnsRun(ctx, false)
	if err != nil {
		return s.failed(fmt.Errorf("unguarded run: %w", err))
	}
	s.Unguarded = un
	s.say("unguarded: counter %d, expected %d: %s lost, %s %s", un.Counter, un.Expected,
		plural(int(un.LostUpdates), "update", "updates"), plural(un.Overlaps, "overlap", "overlaps"), expected(un.Damaged))
	g, err := d.turnsRun(ctx, true)
	if err != nil {
		return s.failed(fmt.Errorf("guarded run: %w", err))
	}
	s.Guarded = g
	s.OK = !g.Damaged
	s.say("guarded:   counter %d, expected %d: %s lost, %s %s", g.Counter, g.Expected,
		plural(int(g.LostUpdates), "update", "updates"), plural(g.Overlaps, "overlap", "overlaps"), mark(s.OK))
	s.say("%s%d turns, %d hand-overs between the processes", indent, g.Sections, g.HandOvers)
	if n := len(g.Tokens); n > 0 {
		how := "strictly increasing " + check
		if !g.TokensIncreasing {
			how = "NOT strictly increasing " + cross
		}
		s.say("%sfencing tokens %s: %d … %d", indent, how, g.Tokens[0], g.Tokens[n-1])
	}
	return s
}

func (d *demo) turnsRun(ctx context.Context, guarded bool) (*turnsResult, error) {
	began := time.Now()
	mode := "unguarded"
	if guarded {
		mode = "guarded"
	}
	counter := d.key("counter/" + mode)
	if err := writeCounter(ctx, d.data, counter, 0); err != nil {
		return nil, err
	}
	procs := make([]*proc, turnsWorkers)
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.Kill()
			}
		}
	}()
	for i := range procs {
		args := []string{"-role", "turns", "-id", strconv.Itoa(i + 1), "-db", d.dbPath,
			"-key", d.key("counter"), "-name", counter, "-rounds", strconv.Itoa(turnsRounds),
			"-hold", turnsHold.String(), "-pause", turnsPause.String(), "-ttl", turnsTTL.String()}
		if guarded {
			args = append(args, "-backend", d.workerBackend())
		} else {
			args = append(args, "-unguarded")
		}
		p, err := startWorker(ctx, d.self, fmt.Sprintf("worker %d", i+1), args...)
		if err != nil {
			return nil, err
		}
		procs[i] = p
	}
	// Start both at once: processes start at different speeds, and the
	// unguarded race is only fair if they run side by side.
	for _, p := range procs {
		if _, err := p.Expect(ctx, "ready", 15*time.Second); err != nil {
			return nil, err
		}
	}
	for _, p := range procs {
		if err := p.Go(); err != nil {
			return nil, err
		}
	}
	var sections []event
	for _, p := range procs {
		for {
			ev, err := p.Next(ctx, 15*time.Second)
			if err != nil {
				return nil, err
			}
			if ev.Ev == "done" {
				break
			}
			if ev.Ev == "section" {
				sections = append(sections, ev)
			}
		}
		if err := p.Wait(ctx); err != nil {
			return nil, err
		}
	}
	final, err := readCounter(ctx, d.data, counter)
	if err != nil {
		return nil, err
	}
	r := analyseTurns(sections, guarded)
	r.Workers, r.Rounds = turnsWorkers, turnsRounds
	r.Expected = int64(turnsWorkers * turnsRounds)
	r.Counter = final
	r.LostUpdates = r.Expected - final
	r.Damaged = r.LostUpdates != 0 || r.Overlaps != 0 || len(sections) != int(r.Expected) ||
		(guarded && !r.TokensIncreasing)
	r.DurationMS = ms(time.Since(began))
	return r, nil
}

// analyseTurns orders the sections by start time and counts overlaps and
// hand-overs. Start is taken after the lock is held and End before it is
// released, so two sections that overlap here overlapped for real.
func analyseTurns(sections []event, guarded bool) *turnsResult {
	slices.SortFunc(sections, func(a, b event) int { return cmp.Compare(a.Start, b.Start) })
	r := &turnsResult{Sections: len(sections), TokensIncreasing: guarded}
	for j, b := range sections {
		for _, a := range sections[:j] {
			if a.Worker != b.Worker && a.End > b.Start {
				r.Overlaps++
			}
		}
		if j > 0 && sections[j-1].Worker != b.Worker {
			r.HandOvers++
		}
		if guarded {
			r.Tokens = append(r.Tokens, b.Token)
			if j > 0 && b.Token <= sections[j-1].Token {
				r.TokensIncreasing = false
			}
		}
	}
	return r
}
