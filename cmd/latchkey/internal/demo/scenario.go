package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A scenario is one classic failure, played without its guard (the damage,
// counted) and with it (none allowed). Each scenario's file registers one;
// the demo's order, its help, --only, the tables it creates and the roles
// its workers play all come from the registry.
type scenario struct {
	order int    // where it comes in the demo
	name  string // for --only and the report
	title string // the report's heading
	// menu and menuGuard are its line in the help: what happens, and the
	// guard in a few words.
	menu, menuGuard string
	guard           string // what the guarded run relies on
	why             string // why the guard works
	unit            string // what its damage is counted in
	// crossProcess says its locks must reach its workers: on an in-process
	// backend (mem://) it is skipped.
	crossProcess bool
	tables       []string // CREATE TABLE IF NOT EXISTS statements of its data
	roles        []*role  // what its workers play
	// play runs it and fills in r, its report; an error stops it and counts
	// as damage.
	play func(ctx context.Context, d *demo, r *Result) error
}

// A role is a part a worker process plays in a scenario.
type role struct {
	name     string
	scenario *scenario // set by register
	run      func(ctx context.Context, w *worker, params json.RawMessage) error
}

// roleOf makes a role whose parameters, sent as JSON, are a P.
func roleOf[P any](name string, play func(context.Context, *worker, P) error) *role {
	return &role{name: name, run: func(ctx context.Context, w *worker, raw json.RawMessage) error {
		var p P
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("role %s: parameters: %w", name, err)
		}
		return play(ctx, w, p)
	}}
}

// id names the role on a worker's command line: scenario/role.
func (r *role) id() string { return r.scenario.name + "/" + r.name }

// registry holds the scenarios in their order. Only register changes it,
// from the scenarios' init functions.
var registry []*scenario

// register adds s. A name or an order taken twice is a mistake in the
// program, caught by any run of it.
func register(s *scenario) {
	for _, o := range registry {
		if o.name == s.name || o.order == s.order {
			panic(fmt.Sprintf("demo: scenarios %q and %q share a name or an order", o.name, s.name))
		}
	}
	for _, r := range s.roles {
		r.scenario = s
	}
	i, _ := slices.BinarySearchFunc(registry, s.order, func(o *scenario, n int) int { return o.order - n })
	registry = slices.Insert(registry, i, s)
}

// Names returns the scenarios' names in the order they play.
func Names() []string {
	names := make([]string, len(registry))
	for i, s := range registry {
		names[i] = s.name
	}
	return names
}

// ErrUnknownScenario is returned, wrapped, by Run for a name in
// Options.Only that no scenario has.
var ErrUnknownScenario = errors.New("no scenario")

// choose returns the scenarios only names, in the demo's order; all of them
// when only is empty.
func choose(only []string) ([]*scenario, error) {
	if len(only) == 0 {
		return registry, nil
	}
	for _, n := range only {
		if !slices.Contains(Names(), n) {
			return nil, fmt.Errorf("--only: %w %q (there are: %s)", ErrUnknownScenario, n, strings.Join(Names(), ", "))
		}
	}
	var chosen []*scenario
	for _, s := range registry {
		if slices.Contains(only, s.name) {
			chosen = append(chosen, s)
		}
	}
	return chosen, nil
}

// findRole returns the role a worker's -role names.
func findRole(id string) (*role, error) {
	name, part, _ := strings.Cut(id, "/")
	for _, s := range registry {
		if s.name != name {
			continue
		}
		for _, r := range s.roles {
			if r.name == part {
				return r, nil
			}
		}
	}
	return nil, fmt.Errorf("unknown role %q", id)
}
