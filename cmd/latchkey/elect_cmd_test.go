package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// electProc starts "latchkey elect args..." as a separate process in dir.
func electProc(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return cliProc(t, dir, "elect", args...)
}

func TestElectExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"success", []string{"--key", "e", "--backend", url, "--", "true"}, 0},
		{"command's status", []string{"--key", "e", "--backend", url, "--", "sh", "-c", "exit 3"}, 3},
		{"no key", []string{"--backend", url, "--", "true"}, exitUsage},
		{"no command", []string{"--key", "e", "--backend", url}, exitUsage},
		{"huge value", []string{"--key", "e", "--value", strings.Repeat("v", elect.MaxValueLen+1), "--backend", url, "--", "true"}, exitUsage},
		{"again with wait", []string{"--key", "e", "--again", "--wait", "1s", "--backend", url, "--", "true"}, exitUsage},
		{"no such command", []string{"--key", "e", "--backend", url, "--", filepath.Join(dir, "missing")}, exitNoCommand},
		{"backend down", []string{"--key", "e", "--backend", "redis://127.0.0.1:1/0?dial_timeout=200ms", "--", "true"}, exitUnavailable},
		{"show: no name", []string{"show", "--backend", url}, exitUsage},
		{"show: nobody leads", []string{"show", "nobody", "--backend", url}, exitNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errb := latchkey(t, append([]string{"elect"}, tc.args...)...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.want, errb)
			}
		})
	}
}

// TestElectNotElected: with --wait 0, a candidate whose election someone
// else leads exits 75 without running its command; show names the leader.
func TestElectNotElected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	e, err := elect.New(openLocker(t, url), "job")
	if err != nil {
		t.Fatal(err)
	}
	term, err := e.Campaign(t.Context(), "the-leader")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(t.Context())
	code, _, errb := latchkey(t, "elect", "--key", "job", "--wait", "0", "--backend", url, "--", "touch", filepath.Join(dir, "ran"))
	if code != exitNotAcquired {
		t.Fatalf("exit %d, want %d: %s", code, exitNotAcquired, errb)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the command ran although someone else leads")
	}
	code, out, errb := latchkey(t, "elect", "show", "job", "--json", "--backend", url)
	var got leaderJSON
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("show: exit %d, %q; stderr %s", code, out, errb)
	}
	if !got.Elected || got.Value != "the-leader" || got.Token != term.Token() || got.Name != "job" {
		t.Fatalf("show --json = %+v, want the-leader with token %d", got, term.Token())
	}
	code, out, _ = latchkey(t, "elect", "show", "job", "--backend", url)
	if code != exitOK || !strings.Contains(out, `"the-leader"`) || !strings.Contains(out, strconv.FormatUint(term.Token(), 10)) {
		t.Fatalf("show: exit %d, %q", code, out)
	}
	code, out, errb = latchkey(t, "elect", "observe", "job", "--changes", "1", "--backend", url)
	if want := `leader "the-leader" token ` + strconv.FormatUint(term.Token(), 10); code != exitOK || !strings.HasSuffix(strings.TrimSpace(out), want) {
		t.Fatalf("observe --changes 1: exit %d, %q (stderr %s), want a line ending %q", code, out, errb, want)
	}
}

// TestElectStopsCommandOnLostTerm: when the term is lost (its lock broken),
// the command gets SIGTERM and latchkey exits 76; the command had the
// term's token in its environment.
func TestElectStopsCommandOnLostTerm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	cmd, out := electProc(t, dir, "--key", "job", "--ttl", "1s", "--backend", url, "--",
		"sh", "-c", `trap 'echo stopped > stopped; exit 0' TERM; echo "$LATCHKEY_FENCING_TOKEN" > token; touch started; while :; do sleep 0.05; done`)
	waitFile(t, filepath.Join(dir, "started"))
	l := openLocker(t, url)
	info, err := lock.Break(t.Context(), l, "job", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := exitCode(t, cmd); got != exitLeaseLost {
		t.Fatalf("exit %d, want %d: %s", got, exitLeaseLost, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "stopped")); err != nil {
		t.Fatalf("the command was not sent SIGTERM: %s", out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "token"))
	if strings.TrimSpace(string(b)) != strconv.FormatUint(info.Token, 10) {
		t.Fatalf("the command's token %q, the broken term's %d", b, info.Token)
	}
}

// TestElectOneLeaderAmongFive starts five "latchkey elect --again"
// processes whose command checks, with a directory only one can create,
// that it runs alone, and logs its token (a write log a fenced resource
// would keep); each term ends when its command does, and the next
// candidate takes over. The log must show no overlap and
// tokens rising term after term; observe, running beside them, must show
// the leaders in the same order.
func TestElectOneLeaderAmongFive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	const script = `[ -e stop ] && exit 0
mkdir inside 2>/dev/null || echo "overlap $LATCHKEY_FENCING_TOKEN" >> overlaps
echo "$LATCHKEY_FENCING_TOKEN" >> tokens
sleep 0.1
rmdir inside`
	observed := observeLeaders(t, dir, "shared-job", url)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 5 {
		cmd, out := electProc(t, dir, "--key", "shared-job", "--again", "--ttl", "2s", "--value", "candidate-"+strconv.Itoa(i),
			"--backend", url, "--", "sh", "-c", script)
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	waitTerms(t, filepath.Join(dir, "tokens"), 15)
	// Stop the terms' work first, so that SIGTERM cuts no command short
	// inside, which would leave the next leader to find the directory.
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // longer than a command that began before the stop
	for _, cmd := range cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, cmd := range cmds {
		if got := exitCode(t, cmd); got != exitInterrupted {
			t.Errorf("a candidate exited %d after SIGTERM, want %d:\n%s", got, exitInterrupted, outs[i])
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
		t.Fatalf("two leaders at once: %s", b)
	}
	checkObservedTerms(t, received(observed), risingTokens(t, filepath.Join(dir, "tokens")))
}

// observeLeaders starts "latchkey elect observe name --json" in dir and
// sends on the channel each leader it prints; the channel closes when
// observe ends.
func observeLeaders(t *testing.T, dir, name, url string) <-chan leaderJSON {
	t.Helper()
	obs := exec.Command(os.Args[0], "elect", "observe", name, "--json", "--backend", url)
	obs.Dir = dir
	out, err := obs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Process.Kill(); _ = obs.Wait() })
	lines := make(chan leaderJSON, 1024) // never blocks a test that reads at the end
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l leaderJSON
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			}
		}
		close(lines)
	}()
	return lines
}

// received returns the leaders observe has printed so far.
func received(lines <-chan leaderJSON) []leaderJSON {
	var got []leaderJSON
	for {
		select {
		case l, open := <-lines:
			if !open {
				return got
			}
			got = append(got, l)
		default:
			return got
		}
	}
}

// nextLeader returns the next line of observe that ok accepts, and fails the
// test if none comes within 30 s.
func nextLeader(t *testing.T, lines <-chan leaderJSON, what string, ok func(leaderJSON) bool) leaderJSON {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, open := <-lines:
			if !open {
				t.Fatalf("observe ended, waiting for %s", what)
			}
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %s from observe", what)
		}
	}
}

// waitTerms waits, for up to 60 s, until the log at path holds n tokens.
func waitTerms(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if len(strings.Fields(string(b))) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d terms in 60 s: %q", n, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// risingTokens reads the log at path, whose tokens must rise strictly term
// after term.
func risingTokens(t *testing.T, path string) []uint64 {
	t.Helper()
	b, _ := os.ReadFile(path)
	var tokens []uint64
	for _, s := range strings.Fields(string(b)) {
		tok, err := strconv.ParseUint(s, 10, 64)
		if err != nil || (len(tokens) > 0 && tok <= tokens[len(tokens)-1]) {
			t.Fatalf("tokens not strictly increasing term after term: %s", b)
		}
		tokens = append(tokens, tok)
	}
	return tokens
}

// checkObservedTerms checks that every elected leader observed is a real
// term, in order: one of tokens, or one begun after the last of them.
func checkObservedTerms(t *testing.T, observed []leaderJSON, tokens []uint64) {
	t.Helper()
	known := map[uint64]bool{}
	for _, tok := range tokens {
		known[tok] = true
	}
	var last uint64
	elected := 0
	for _, l := range observed {
		if !l.Elected {
			continue
		}
		elected++
		if l.Token <= last {
			t.Fatalf("observed terms out of order: %+v", observed)
		}
		last = l.Token
		if !known[l.Token] && l.Token < tokens[len(tokens)-1] {
			t.Fatalf("observed a leader with token %d that never ran: %+v", l.Token, l)
		}
		if !strings.HasPrefix(l.Value, "candidate-") {
			t.Fatalf("observed value %q", l.Value)
		}
	}
	if elected == 0 {
		t.Fatal("observe saw no leader")
	}
}

// TestElectObserveSaysLeaderUnknownInAnOutage: with Redis stopped, "elect
// observe" once kept its last line, the old leader, for as long as it ran,
// while that leader had exited with a lost term. It must print that who
// leads is unknown, with the reason, within the leader's lease, and the
// leader again once Redis is back.
func TestElectObserveSaysLeaderUnknownInAnOutage(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	url := "redis://" + srv.Addr()
	electProc(t, "", "--key", "outage", "--ttl", "2s", "--value", "host-a", "--backend", url, "--", "sleep", "60")
	lines := observeLeaders(t, "", "outage", url)
	nextLeader(t, lines, "host-a as leader", func(l leaderJSON) bool { return l.Elected && l.Value == "host-a" })
	srv.Stop()
	l := nextLeader(t, lines, "word of the outage", func(l leaderJSON) bool {
		if l.Elected {
			t.Fatalf("observe printed a leader during the outage: %+v", l)
		}
		return l.Unknown
	})
	if l.Error == "" {
		t.Fatalf("leader unknown without a reason: %+v", l)
	}
	srv.Start()
	// host-a's latchkey lost its term in the outage and exited; a new one leads.
	electProc(t, "", "--key", "outage", "--ttl", "2s", "--value", "host-b", "--backend", url, "--", "sleep", "60")
	nextLeader(t, lines, "host-b as leader after the outage", func(l leaderJSON) bool { return l.Elected && l.Value == "host-b" })
}

// TestElectHolder: elect takes --holder, as run does, for the value others
// read (elect show, lock show), and refuses it beside a different --value.
func TestElectHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	show := os.Args[0] + " elect show job --json --backend " + url + " > " + filepath.Join(dir, "show.json")
	code, _, errb := latchkey(t, "elect", "--key", "job", "--holder", "batch-host-7", "--backend", url, "--", "sh", "-c", show)
	if code != exitOK {
		t.Fatalf("elect --holder: exit %d: %s", code, errb)
	}
	b, err := os.ReadFile(filepath.Join(dir, "show.json"))
	var got leaderJSON
	if err != nil || json.Unmarshal(b, &got) != nil || got.Value != "batch-host-7" {
		t.Fatalf("elect show during the term: %q (%v), want the value batch-host-7", b, err)
	}
	code, _, errb = latchkey(t, "elect", "--key", "job", "--holder", "a", "--value", "b", "--backend", url, "--", "true")
	if code != exitUsage || !strings.Contains(errb, "--holder and --value") {
		t.Fatalf("--holder beside --value: exit %d, %q; want %d naming both", code, errb, exitUsage)
	}
}
