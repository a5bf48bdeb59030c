package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// envCLI makes the test binary behave as the latchkey command. The demo
// starts its workers from its own executable; under "go test" that is this
// test binary, so the tests run the real worker code in real processes.
const envCLI = "LATCHKEY_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envCLI) == "1" {
		os.Exit(cliMain(os.Args[1:]))
	}
	os.Setenv(envCLI, "1") // for the workers and CLI processes tests start
	os.Exit(m.Run())
}

// latchkey runs the command in this process and returns its exit status and
// output.
func latchkey(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// The JSON report, as a consumer would decode it.
type jsonReport struct {
	OK        bool   `json:"ok"`
	Backend   string `json:"backend"`
	Scenarios []struct {
		Name      string          `json:"name"`
		OK        bool            `json:"ok"`
		Skipped   string          `json:"skipped"`
		Error     string          `json:"error"`
		Unguarded json.RawMessage `json:"unguarded"`
		Guarded   json.RawMessage `json:"guarded"`
	} `json:"scenarios"`
}

type jsonTurns struct {
	Expected         int64    `json:"expected"`
	Counter          int64    `json:"counter"`
	LostUpdates      int64    `json:"lost_updates"`
	Overlaps         int      `json:"overlaps"`
	Sections         int      `json:"sections"`
	HandOvers        int      `json:"hand_overs"`
	Tokens           []uint64 `json:"tokens"`
	TokensIncreasing bool     `json:"tokens_increasing"`
	Damaged          bool     `json:"damaged"`
}

type jsonCrashGuarded struct {
	HolderToken    uint64 `json:"holder_token"`
	ImmediateTry   string `json:"immediate_try"`
	Acquired       bool   `json:"acquired"`
	WaitedMS       int64  `json:"waited_ms"`
	SuccessorToken uint64 `json:"successor_token"`
	TokenHigher    bool   `json:"token_higher"`
	Damaged        bool   `json:"damaged"`
}

type jsonCrashUnguarded struct {
	Stuck   bool `json:"stuck"`
	Damaged bool `json:"damaged"`
}

type jsonStock struct {
	Buyers    int   `json:"buyers"`
	Sales     int   `json:"sales"`
	Refused   int   `json:"refused"`
	Oversold  int   `json:"oversold"`
	StockLeft int64 `json:"stock_left"`
	Damaged   bool  `json:"damaged"`
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

func demoJSON(t *testing.T, wantCode int, args ...string) jsonReport {
	t.Helper()
	code, out, errOut := latchkey(t, append([]string{"demo", "--json"}, args...)...)
	if code != wantCode {
		t.Fatalf("exit status %d, want %d; stderr:\n%s\nstdout:\n%s", code, wantCode, errOut, out)
	}
	var rep jsonReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	names := []string{}
	for _, s := range rep.Scenarios {
		names = append(names, s.Name)
		if s.Error != "" {
			t.Errorf("scenario %s failed: %s", s.Name, s.Error)
		}
	}
	if got := strings.Join(names, " "); got != "two-instances forgot-to-unlock last-item" {
		t.Fatalf("scenarios %q", got)
	}
	return rep
}

// checkClean checks the numbers of a demo run on a backend that processes
// share: the guarded runs are clean, the unguarded damage is counted.
func checkClean(t *testing.T, rep jsonReport) {
	t.Helper()
	if !rep.OK {
		t.Error("report not ok")
	}
	for _, s := range rep.Scenarios {
		if !s.OK || s.Skipped != "" {
			t.Errorf("%s: ok=%v skipped=%q", s.Name, s.OK, s.Skipped)
		}
	}

	un := decode[jsonTurns](t, rep.Scenarios[0].Unguarded)
	g := decode[jsonTurns](t, rep.Scenarios[0].Guarded)
	t.Logf("two-instances: unguarded %+v", un)
	// The unguarded workers start together and run in step, so their
	// read-sleep-write sections overlap: updates are lost.
	if un.LostUpdates != un.Expected-un.Counter || un.LostUpdates == 0 || !un.Damaged {
		t.Errorf("unguarded two-instances: damage not counted: %+v", un)
	}
	if g.Damaged || g.Counter != 16 || g.Expected != 16 || g.LostUpdates != 0 || g.Overlaps != 0 ||
		g.Sections != 16 || len(g.Tokens) != 16 || !g.TokensIncreasing || g.HandOvers == 0 {
		t.Errorf("guarded two-instances: %+v", g)
	}
	for i := 1; i < len(g.Tokens); i++ {
		if g.Tokens[i] <= g.Tokens[i-1] {
			t.Errorf("tokens not increasing: %v", g.Tokens)
		}
	}

	cu := decode[jsonCrashUnguarded](t, rep.Scenarios[1].Unguarded)
	cg := decode[jsonCrashGuarded](t, rep.Scenarios[1].Guarded)
	if !cu.Stuck || !cu.Damaged {
		t.Errorf("unguarded forgot-to-unlock: %+v", cu)
	}
	// Killed 0.7 s into a 1.5 s lease renewed every 0.5 s: the lease runs
	// at least 0.8 s past the kill, and the successor must not get in before.
	if cg.Damaged || cg.ImmediateTry != "refused" || !cg.Acquired || !cg.TokenHigher ||
		cg.SuccessorToken <= cg.HolderToken || cg.WaitedMS < 700 || cg.WaitedMS > 3500 {
		t.Errorf("guarded forgot-to-unlock: %+v", cg)
	}

	su := decode[jsonStock](t, rep.Scenarios[2].Unguarded)
	sg := decode[jsonStock](t, rep.Scenarios[2].Guarded)
	t.Logf("last-item: unguarded %+v", su)
	if su.Sales < 2 || su.Oversold != su.Sales-1 || su.Sales+su.Refused != 100 || !su.Damaged {
		t.Errorf("unguarded last-item: damage not counted: %+v", su)
	}
	if sg.Damaged || sg.Sales != 1 || sg.Refused != 99 || sg.Oversold != 0 || sg.StockLeft != 0 {
		t.Errorf("guarded last-item: %+v", sg)
	}
}

func TestDemoJSON(t *testing.T) {
	t.Parallel()
	checkClean(t, demoJSON(t, exitOK))
}

func TestDemoPostgres(t *testing.T) {
	t.Parallel()
	url := testsvc.PostgresURL(t)
	rep := demoJSON(t, exitOK, "--backend", url)
	if !strings.HasPrefix(rep.Backend, "postgres://") {
		t.Errorf("backend %q", rep.Backend)
	}
	checkClean(t, rep)
}

func TestDemoDBFlagKeepsFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mine.db")
	rep := demoJSON(t, exitOK, "--db", path, "--backend", "mem://")
	if _, err := os.Stat(path); err != nil {
		t.Errorf("--db file not kept: %v", err)
	}
	// mem:// locks cannot reach the workers: the process scenarios are
	// skipped, not shown as damage.
	for _, s := range rep.Scenarios[:2] {
		if s.Skipped == "" || !s.OK {
			t.Errorf("%s on mem://: ok=%v skipped=%q", s.Name, s.OK, s.Skipped)
		}
	}
	if sg := decode[jsonStock](t, rep.Scenarios[2].Guarded); sg.Sales != 1 || sg.Refused != 99 {
		t.Errorf("guarded last-item on mem://: %+v", sg)
	}
}

// TestDemoSabotaged breaks the lock in every guarded run (each participant
// gets a private lock) to prove the demo notices damage where a lock should
// have prevented it, and exits 1: with a working lock that path never runs.
func TestDemoSabotaged(t *testing.T) {
	t.Parallel()
	rep := demoJSON(t, exitFail, "--sabotage")
	if rep.OK {
		t.Error("report ok")
	}
	for _, s := range rep.Scenarios {
		if s.OK {
			t.Errorf("%s: damage with a broken lock not caught", s.Name)
		}
	}
	if g := decode[jsonCrashGuarded](t, rep.Scenarios[1].Guarded); g.ImmediateTry != "acquired" {
		t.Errorf("forgot-to-unlock with a broken lock: %+v", g)
	}
	if g := decode[jsonStock](t, rep.Scenarios[2].Guarded); g.Sales < 2 {
		t.Errorf("last-item with a broken lock: %+v", g)
	}
}

func TestDemoText(t *testing.T) {
	t.Parallel()
	code, out, errOut := latchkey(t, "demo")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"1. Two instances, one lock",
		"guarded:   counter 16, expected 16: 0 updates lost, 0 overlaps ✓",
		"fencing tokens strictly increasing ✓",
		"2. Forgot to unlock",
		"right after the kill: try refused",
		"3. The last item: 100 buyers",
		"guarded:   1 sale, 99 refused, 0 left ✓",
		"✓ every guarded run was clean (3 scenarios,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 100 || strings.ContainsAny(l, "\t\x1b") {
			t.Errorf("line of %d characters (or tab, escape): %q", n, l)
		}
	}
}

// TestInterrupt sends SIGINT to a real latchkey process in the middle of the
// demo: it must stop its workers, remove its temporary directory and say so.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("finds leftover processes through /proc")
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "demo")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	// Scenario 2's holders live for about a second after scenario 1's report.
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(strings.TrimSpace(sc.Text()), "why:") {
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(workersUnder(t, tmp)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no worker process seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(new(bytes.Buffer)) }()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Errorf("exit: %v, want status %d", err, exitInterrupted)
	}
	if !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("stderr: %q", errb.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "latchkey-demo-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	time.Sleep(100 * time.Millisecond) // killed workers vanish from /proc once reaped
	if pids := workersUnder(t, tmp); len(pids) > 0 {
		t.Errorf("worker processes left: %v", pids)
	}
}

// workersUnder returns the pids of demo workers whose arguments name a file
// under dir.
func workersUnder(t *testing.T, dir string) []string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == workerCommand && strings.Contains(string(b), dir) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		stdout    string // substring expected on stdout
		stderr    string // substring expected on stderr
		notStdout string
	}{
		{args: nil, code: exitUsage, stderr: "Usage:"},
		{args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{args: []string{"help"}, code: exitOK, stdout: "demo ", notStdout: workerCommand},
		{args: []string{"--help"}, code: exitOK, stdout: "Commands:"},
		{args: []string{"help", "demo"}, code: exitOK, stdout: "--backend URL", notStdout: "sabotage"},
		{args: []string{"help", "nope"}, code: exitUsage, stderr: "unknown command"},
		{args: []string{"version"}, code: exitOK, stdout: "latchkey "},
		{args: []string{"version", "x"}, code: exitUsage, stderr: "usage"},
		{args: []string{"demo", "-h"}, code: exitOK, stderr: "--json"},
		{args: []string{"demo", "--bogus"}, code: exitUsage, stderr: "flag provided but not defined"},
		{args: []string{"demo", "extra"}, code: exitUsage, stderr: `unexpected argument "extra"`},
		{args: []string{"demo", "--backend", "consul://user:hunter22@localhost"}, code: exitFail, stderr: "supported: etcd://, mem://"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := latchkey(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			if !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
			}
			if tc.notStdout != "" && strings.Contains(out, tc.notStdout) {
				t.Errorf("stdout shows %q:\n%s", tc.notStdout, out)
			}
			if strings.Contains(out+errOut, "hunter22") {
				t.Error("password printed")
			}
		})
	}
}

func TestAnalyseTurns(t *testing.T) {
	sec := func(worker int, token uint64, start, end int64) event {
		return event{Ev: "section", Worker: worker, Token: token, Start: start, End: end}
	}
	r := analyseTurns([]event{sec(2, 3, 20, 29), sec(1, 1, 0, 9), sec(1, 2, 10, 19), sec(2, 4, 30, 39)}, true)
	if r.Overlaps != 0 || r.HandOvers != 1 || !r.TokensIncreasing || len(r.Tokens) != 4 {
		t.Errorf("clean turns: %+v", r)
	}
	r = analyseTurns([]event{sec(1, 5, 0, 10), sec(2, 4, 5, 15), sec(1, 6, 12, 20)}, true)
	if r.Overlaps != 2 || r.HandOvers != 2 || r.TokensIncreasing {
		t.Errorf("overlapping turns: %+v", r)
	}
	// One worker's sections never overlap each other.
	r = analyseTurns([]event{sec(1, 0, 0, 10), sec(1, 0, 5, 15)}, false)
	if r.Overlaps != 0 || r.Tokens != nil {
		t.Errorf("unguarded, one worker: %+v", r)
	}
}
