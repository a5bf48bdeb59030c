package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateReference = flag.Bool("update-reference", false, "rewrite cmd/latchkey/README.md from the commands' help")

// cliReference renders the CLI reference: the overview, then every
// command's help and every subcommand's, as "latchkey help" prints them.
func cliReference(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# latchkey: the command reference\n\n")
	b.WriteString("This page is generated from the commands' own help (`latchkey help COMMAND [SUBCOMMAND]`);\n")
	b.WriteString("a test checks it against the binary. To regenerate it after changing a help text:\n")
	b.WriteString("`go test ./cmd/latchkey -run TestCLIReference -update-reference`.\n\n")
	_, overview, _ := latchkey(t, "help")
	fmt.Fprintf(&b, "```\n%s```\n", overview)
	for _, c := range commands() {
		if c.summary == "" || c.name == "help" {
			continue
		}
		code, out, errb := latchkey(t, "help", c.name)
		if code != exitOK {
			t.Fatalf("help %s: exit %d: %s", c.name, code, errb)
		}
		fmt.Fprintf(&b, "\n## latchkey %s\n\n```\n%s```\n", c.name, out)
		if c.name == "completion" {
			continue // its "subcommands" are shells, with one help
		}
		for _, sub := range c.subs {
			code, subOut, errb := latchkey(t, "help", c.name, sub)
			if code != exitOK {
				t.Fatalf("help %s %s: exit %d: %s", c.name, sub, code, errb)
			}
			if subOut == out {
				continue // the command's help covers its subcommands
			}
			out := subOut
			fmt.Fprintf(&b, "\n### latchkey %s %s\n\n```\n%s```\n", c.name, sub, out)
		}
	}
	// Defaults that depend on this machine read as they would anywhere.
	s := strings.ReplaceAll(b.String(), defaultHolder(), "HOST pid PID")
	s = strings.ReplaceAll(s, `"`+defaultAsker()+`"`, `"$USER"`)
	s = strings.ReplaceAll(s, os.TempDir(), "$TMPDIR")
	return s
}

// TestCLIReference: cmd/latchkey/README.md is the commands' help as they
// print it now.
func TestCLIReference(t *testing.T) {
	want := cliReference(t)
	if *updateReference {
		if err := os.WriteFile("README.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("cmd/latchkey/README.md differs from the commands' help: go test ./cmd/latchkey -run TestCLIReference -update-reference")
	}
}
