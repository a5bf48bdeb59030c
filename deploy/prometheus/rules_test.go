package prometheus_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestCheckRules runs `promtool check rules`: the rules parse, their
// expressions are valid PromQL, and their templates render.
func TestCheckRules(t *testing.T) {
	out, err := exec.Command(testsvc.Promtool(t), "check", "rules", "latchkey.rules.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestRuleUnitTests runs `promtool test rules`: every alert fires on the
// series it is for, not before its `for:`, and not on the healthy series
// beside them.
func TestRuleUnitTests(t *testing.T) {
	out, err := exec.Command(testsvc.Promtool(t), "test", "rules", "latchkey.rules.test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules did not report success:\n%s", out)
	}
}

// TestEveryAlertTested checks that each alert of the rule file has a unit
// test, so a new alert cannot ship untested.
func TestEveryAlertTested(t *testing.T) {
	rules := read(t, "latchkey.rules.yml")
	tests := read(t, "latchkey.rules.test.yml")
	var n int
	for _, line := range strings.Split(rules, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: ")
		if !ok {
			continue
		}
		n++
		if !strings.Contains(tests, "alertname: "+name+"\n") {
			t.Errorf("alert %s has no promtool test", name)
		}
	}
	if n < 7 {
		t.Errorf("%d alerts found, want at least 7", n)
	}
}
