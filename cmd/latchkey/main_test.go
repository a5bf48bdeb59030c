package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchkey-go/latchkey/cmd/latchkey/internal/demo"
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
	OK        bool           `json:"ok"`
	Backend   string         `json:"backend"`
	DB        string         `json:"db"`
	Store     string         `json:"store"`
	Scenarios []jsonScenario `json:"scenarios"`
}

type jsonScenario struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Skipped string `json:"skipped"`
	Error   string `json:"error"`
	Damage  struct {
		Unit      string `json:"unit"`
		Unguarded int    `json:"unguarded"`
		Guarded   int    `json:"guarded"`
	} `json:"damage"`
	Unguarded json.RawMessage `json:"unguarded"`
	Guarded   json.RawMessage `json:"guarded"`
	Timeline  struct {
		Unguarded []jsonStep `json:"unguarded"`
		Guarded   []jsonStep `json:"guarded"`
	} `json:"timeline"`
}

type jsonStep struct {
	AtMS  int64  `json:"at_ms"`
	Actor string `json:"actor"`
	Kind  string `json:"kind"`
	Event string `json:"event"`
	Token uint64 `json:"token"`
	Count int    `json:"count"`
}

type jsonPayment struct {
	Copies       int  `json:"copies"`
	Charges      int  `json:"charges"`
	ExtraCharges int  `json:"extra_charges"`
	Replays      int  `json:"replays"`
	Identical    bool `json:"identical"`
	Damaged      bool `json:"damaged"`
	Answers      []struct {
		Copy     int    `json:"copy"`
		Status   int    `json:"status"`
		Replayed bool   `json:"replayed"`
		ChargeID string `json:"charge_id"`
	} `json:"answers"`
}

type jsonMessage struct {
	Deliveries []struct {
		Outcome string `json:"outcome"`
	} `json:"deliveries"`
	Effects int  `json:"effects"`
	Lost    bool `json:"lost"`
	Twice   bool `json:"processed_twice"`
	Damaged bool `json:"damaged"`
}

type jsonTransfer struct {
	Expected      int64    `json:"expected"`
	Final         int64    `json:"final"`
	LostTransfers int      `json:"lost_transfers"`
	Conflicts     int      `json:"version_conflicts"`
	Tokens        []uint64 `json:"tokens"`
	Damaged       bool     `json:"damaged"`
}

type jsonTransferGuarded struct {
	Lock    jsonTransfer `json:"lock"`
	Version jsonTransfer `json:"version"`
}

type jsonStock struct {
	Buyers    int   `json:"buyers"`
	Sales     int   `json:"sales"`
	Refused   int   `json:"refused"`
	Oversold  int   `json:"oversold"`
	StockLeft int64 `json:"stock_left"`
	Damaged   bool  `json:"damaged"`
}

type jsonPaused struct {
	Guard          string `json:"guard"`
	HolderToken    uint64 `json:"holder_token"`
	SuccessorToken uint64 `json:"successor_token"`
	LateWrite      string `json:"late_write"`
	Final          int64  `json:"final"`
	Expected       int64  `json:"expected"`
	Damaged        bool   `json:"damaged"`
}

type jsonPausedUnguarded struct {
	None         jsonPaused `json:"none"`
	FencedWrites jsonPaused `json:"fenced_writes"`
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
	return parseReport(t, out)
}

func parseReport(t *testing.T, out string) jsonReport {
	t.Helper()
	var rep jsonReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	for _, s := range rep.Scenarios {
		if s.Error != "" {
			t.Errorf("scenario %s failed: %s", s.Name, s.Error)
		}
	}
	return rep
}

// wantScenarios checks that rep has exactly the named scenarios, in order.
func wantScenarios(t *testing.T, rep jsonReport, names ...string) {
	t.Helper()
	var got []string
	for _, s := range rep.Scenarios {
		got = append(got, s.Name)
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("scenarios %q, want %q", got, names)
	}
}

func scenarioNamed(t *testing.T, rep jsonReport, name string) jsonScenario {
	t.Helper()
	for _, s := range rep.Scenarios {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return jsonScenario{}
}

// checkClean checks a demo run on a backend that processes share: every
// unguarded run did counted damage, no guarded run did any, and the numbers
// behind the counts say the same.
func checkClean(t *testing.T, rep jsonReport) {
	t.Helper()
	if !rep.OK {
		t.Error("report not ok")
	}
	for _, s := range rep.Scenarios {
		checkCounted(t, s)
	}
	for _, c := range scenarioChecks {
		if has(rep, c.name) {
			c.check(t, scenarioNamed(t, rep, c.name))
		}
	}
}

// checkCounted checks that s ran, counted damage unguarded and none guarded,
// and has a compact timeline of well-formed steps in time order.
func checkCounted(t *testing.T, s jsonScenario) {
	t.Helper()
	if !s.OK || s.Skipped != "" {
		t.Errorf("%s: ok=%v skipped=%q", s.Name, s.OK, s.Skipped)
	}
	if s.Damage.Unguarded <= 0 || s.Damage.Guarded != 0 || s.Damage.Unit == "" {
		t.Errorf("%s: damage %+v, want unguarded > 0 and guarded 0", s.Name, s.Damage)
	}
	if len(s.Timeline.Unguarded) == 0 || len(s.Timeline.Guarded) == 0 {
		t.Errorf("%s: empty timeline", s.Name)
	}
	if n := len(s.Timeline.Unguarded) + len(s.Timeline.Guarded); n > 40 {
		t.Errorf("%s: %d timeline steps: not compact", s.Name, n)
	}
	for _, tl := range [][]jsonStep{s.Timeline.Unguarded, s.Timeline.Guarded} {
		for i, st := range tl {
			if st.Actor == "" || st.Kind == "" || st.Event == "" || (i > 0 && st.AtMS < tl[i-1].AtMS) {
				t.Errorf("%s: step %d %+v malformed or out of order", s.Name, i, st)
			}
		}
	}
}

// scenarioChecks are the numbers behind each scenario's counts, in the
// demo's order.
var scenarioChecks = []struct {
	name  string
	check func(t *testing.T, s jsonScenario)
}{
	{"payment", checkPayment},
	{"failed-handler", checkFailedHandler},
	{"transfers", checkTransfers},
	{"last-item", checkLastItem},
	{"paused-holder", checkPausedHolderRuns},
	{"forgot-to-unlock", checkForgotToUnlock},
}

// checkPayment: a charge per copy unguarded (the first copy's client gives
// up after 100 ms; on a slow machine that copy may never have reached its
// server), one charge guarded, and every copy that got an answer got the
// same one, replayed.
func checkPayment(t *testing.T, pay jsonScenario) {
	t.Helper()
	pu, pg := decode[jsonPayment](t, pay.Unguarded), decode[jsonPayment](t, pay.Guarded)
	if pu.Copies != 4 || pu.Charges < 3 || pu.ExtraCharges != pu.Charges-1 || !pu.Damaged ||
		pay.Damage.Unguarded != pu.ExtraCharges {
		t.Errorf("unguarded payment: %+v", pu)
	}
	if pg.Charges != 1 || pg.ExtraCharges != 0 || pg.Replays < 2 || !pg.Identical || pg.Damaged {
		t.Errorf("guarded payment: %+v", pg)
	}
	checkPaymentAnswers(t, pg)
	if !hasKind(pay.Timeline.Guarded, "replayed") || countKind(pay.Timeline.Guarded, "charged") != 1 ||
		countKind(pay.Timeline.Unguarded, "charged") != pu.Charges {
		t.Errorf("payment timelines: %+v / %+v", pay.Timeline.Unguarded, pay.Timeline.Guarded)
	}
}

// checkPaymentAnswers: every answer is a 200 naming the one charge, and all
// but the copy that ran are replays: that is the first copy, whose client
// gave up, unless a loaded machine delayed it past the double click.
func checkPaymentAnswers(t *testing.T, pg jsonPayment) {
	t.Helper()
	ids := map[string]bool{}
	fresh := 0
	for _, a := range pg.Answers {
		if a.Status == 0 {
			continue
		}
		ids[a.ChargeID] = true
		if !a.Replayed {
			fresh++
		}
		if a.Status != 200 || fresh > 1 {
			t.Errorf("guarded payment answer %+v (answers not replayed: %d)", a, fresh)
		}
	}
	if len(ids) != 1 {
		t.Errorf("guarded payment: answers name charges %v", ids)
	}
}

// checkFailedHandler: naive loses the message, dedup applies it once.
func checkFailedHandler(t *testing.T, msg jsonScenario) {
	t.Helper()
	mu, mg := decode[jsonMessage](t, msg.Unguarded), decode[jsonMessage](t, msg.Guarded)
	if mu.Effects != 0 || !mu.Lost || !mu.Damaged {
		t.Errorf("naive consumer: %+v", mu)
	}
	if mg.Effects != 1 || mg.Lost || mg.Twice || mg.Damaged || len(mg.Deliveries) != 3 ||
		mg.Deliveries[0].Outcome != "failed" || mg.Deliveries[1].Outcome != "processed" || mg.Deliveries[2].Outcome != "duplicate" {
		t.Errorf("dedup consumer: %+v", mg)
	}
}

// checkTransfers: one lost unguarded; both kept with the lock (two
// increasing tokens) and with the version column (after a conflict).
func checkTransfers(t *testing.T, tr jsonScenario) {
	t.Helper()
	tu, tg := decode[jsonTransfer](t, tr.Unguarded), decode[jsonTransferGuarded](t, tr.Guarded)
	t.Logf("transfers: unguarded %+v", tu)
	if tu.Expected != 1300 || tu.Final == 1300 || tu.LostTransfers != 1 || !tu.Damaged {
		t.Errorf("unguarded transfers: %+v", tu)
	}
	if tg.Lock.Final != 1300 || tg.Lock.Damaged || len(tg.Lock.Tokens) != 2 || tg.Lock.Tokens[1] <= tg.Lock.Tokens[0] {
		t.Errorf("transfers with the lock: %+v", tg.Lock)
	}
	if tg.Version.Final != 1300 || tg.Version.Damaged || tg.Version.Conflicts < 1 {
		t.Errorf("transfers with the version: %+v", tg.Version)
	}
}

// checkLastItem: every sale past the first oversold unguarded; one sale
// guarded.
func checkLastItem(t *testing.T, st jsonScenario) {
	t.Helper()
	su, sg := decode[jsonStock](t, st.Unguarded), decode[jsonStock](t, st.Guarded)
	t.Logf("last-item: unguarded %+v", su)
	if su.Sales < 2 || su.Oversold != su.Sales-1 || su.Sales+su.Refused != 100 || !su.Damaged {
		t.Errorf("unguarded last-item: damage not counted: %+v", su)
	}
	if sg.Damaged || sg.Sales != 1 || sg.Refused != 99 || sg.Oversold != 0 || sg.StockLeft != 0 {
		t.Errorf("guarded last-item: %+v", sg)
	}
}

// checkPausedHolderRuns: the paused holder writes after the successor has
// read: its late write lands unguarded and with fenced writes alone, and the
// successor's write erases it; with the claim first it is refused, the
// balance exact, and the successor's token the higher one.
func checkPausedHolderRuns(t *testing.T, pa jsonScenario) {
	t.Helper()
	un, ag := decode[jsonPausedUnguarded](t, pa.Unguarded), decode[jsonPaused](t, pa.Guarded)
	for _, au := range []jsonPaused{un.None, un.FencedWrites} {
		if au.LateWrite != "applied" || au.Final == au.Expected || !au.Damaged {
			t.Errorf("paused holder, %s: %+v", au.Guard, au)
		}
	}
	if pa.Damage.Unguarded != 2 {
		t.Errorf("paused holder: unguarded damage %d, want 2 lost updates", pa.Damage.Unguarded)
	}
	if ag.LateWrite != "refused" || ag.Final != ag.Expected || ag.Final != 700 || ag.Damaged ||
		ag.SuccessorToken <= ag.HolderToken {
		t.Errorf("paused holder, claim first: %+v", ag)
	}
	if !hasKind(pa.Timeline.Guarded, "refused") || !hasKind(pa.Timeline.Guarded, "paused") {
		t.Errorf("paused-holder timeline: %+v", pa.Timeline.Guarded)
	}
}

// checkForgotToUnlock: the holder is killed 0.7 s into a 1.5 s lease
// renewed every 0.5 s, so the lease runs at least 0.8 s past the kill, and
// the successor must not get in before.
func checkForgotToUnlock(t *testing.T, cr jsonScenario) {
	t.Helper()
	cu, cg := decode[jsonCrashUnguarded](t, cr.Unguarded), decode[jsonCrashGuarded](t, cr.Guarded)
	if !cu.Stuck || !cu.Damaged {
		t.Errorf("unguarded forgot-to-unlock: %+v", cu)
	}
	if cg.Damaged || cg.ImmediateTry != "refused" || !cg.Acquired || !cg.TokenHigher ||
		cg.SuccessorToken <= cg.HolderToken || cg.WaitedMS < 700 {
		t.Errorf("guarded forgot-to-unlock: %+v", cg)
	}
}

// has reports whether rep ran the scenario.
func has(rep jsonReport, name string) bool {
	for _, s := range rep.Scenarios {
		if s.Name == name {
			return true
		}
	}
	return false
}

func hasKind(steps []jsonStep, kind string) bool { return countKind(steps, kind) > 0 }

func countKind(steps []jsonStep, kind string) int {
	n := 0
	for _, s := range steps {
		if s.Kind == kind {
			n++
		}
	}
	return n
}

const lockScenarios = "transfers,last-item,paused-holder,forgot-to-unlock"

// TestDemoServers runs the whole demo on each server the flags can name, at
// once: PostgreSQL and MariaDB for data, keys and locks; Redis for keys and
// locks; etcd and ZooKeeper for the locks.
func TestDemoServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   func(t *testing.T) []string
		prefix string // of the reported lock URL
	}{
		{"postgres", func(t *testing.T) []string { return []string{"--db", testsvc.PostgresURL(t)} }, "postgres://"},
		{"redis", func(t *testing.T) []string { return []string{"--db", "redis://" + testsvc.RedisAddr(t)} }, "redis://"},
		// MariaDB for data, keys and locks, in a database of the test's own.
		{"mysql", func(t *testing.T) []string { return []string{"--db", testsvc.MySQLURL(t)} }, "mysql://"},
		// etcd and ZooKeeper hold only locks: the scenarios with locks.
		{"etcd", func(t *testing.T) []string {
			return []string{"--backend", "etcd://" + testsvc.StartEtcd(t).Endpoint(), "--only", lockScenarios}
		}, "etcd://"},
		{"zookeeper", func(t *testing.T) []string {
			return []string{"--backend", "zk://" + testsvc.StartZooKeeper(t).Endpoint(), "--only", lockScenarios}
		}, "zk://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := tc.args(t)
			rep := demoJSON(t, exitOK, args...)
			if slices.Contains(args, "--only") {
				wantScenarios(t, rep, strings.Split(lockScenarios, ",")...)
			} else {
				wantScenarios(t, rep, demo.Names()...)
			}
			if !strings.HasPrefix(rep.Backend, tc.prefix) {
				t.Errorf("locks on %q, want %s", rep.Backend, tc.prefix)
			}
			if tc.name == "redis" && !strings.HasPrefix(rep.Store, "redis://") {
				t.Errorf("keys in %q, want Redis", rep.Store)
			}
			checkClean(t, rep)
		})
	}
}

// TestDemoMySQLPasswordNeverPrinted runs the SQL scenarios on MariaDB as a
// user with a password (and clientFoundRows=true, which the demo's guards
// must not be fooled by), and once with a wrong one: the password appears in
// no output, and the report names the database with it masked.
func TestDemoMySQLPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pa55word"
	u, err := url.Parse(testsvc.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := testsvc.OpenDB(t, "mysql", testsvc.MySQLServerDSN(t))
	var r [4]byte
	_, _ = rand.Read(r[:])
	user := "demo_" + hex.EncodeToString(r[:])
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + secret + "'",
		"GRANT ALL ON " + strings.TrimPrefix(u.Path, "/") + ".* TO '" + user + "'@'%'",
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER '" + user + "'@'%'") })

	u.User = url.UserPassword(user, secret)
	// The demo counts the rows its inserts kept, so it opens its connections
	// without CLIENT_FOUND_ROWS, whatever the URL asks.
	u.RawQuery = "clientFoundRows=true"
	code, out, errOut := latchkey(t, "demo", "--json", "--db", u.String(), "--only", "payment,failed-handler")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut)
	}
	if strings.Contains(out+errOut, secret) {
		t.Fatalf("the password was printed:\n%s\n%s", out, errOut)
	}
	rep := parseReport(t, out)
	checkClean(t, rep)
	if !strings.HasPrefix(rep.DB, "mysql://"+user+":xxxxx@") {
		t.Errorf("report's db = %q, want the URL with the password masked", rep.DB)
	}

	u.User = url.UserPassword(user, secret+"-wrong")
	code, out, errOut = latchkey(t, "demo", "--db", u.String(), "--only", "payment")
	if code == exitOK || !strings.Contains(errOut, "Access denied") {
		t.Errorf("wrong password: exit %d, stderr %q; want a refusal", code, errOut)
	}
	if strings.Contains(out+errOut, secret) {
		t.Fatalf("the wrong password was printed:\n%s\n%s", out, errOut)
	}
}

func TestDemoDBFlagKeepsFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mine.db")
	rep := demoJSON(t, exitOK, "--db", path, "--backend", "mem://", "--only", "payment,transfers")
	wantScenarios(t, rep, "payment", "transfers")
	if _, err := os.Stat(path); err != nil {
		t.Errorf("--db file not kept: %v", err)
	}
	// mem:// locks cannot reach the workers: the scenarios whose locks
	// must are skipped, not shown as damage; the others run on the file.
	for _, s := range rep.Scenarios {
		switch s.Name {
		case "transfers":
			if s.Skipped == "" || !s.OK {
				t.Errorf("%s on mem://: ok=%v skipped=%q", s.Name, s.OK, s.Skipped)
			}
		default:
			if s.Skipped != "" || !s.OK || s.Damage.Guarded != 0 || s.Damage.Unguarded == 0 {
				t.Errorf("%s on mem://: ok=%v skipped=%q damage %+v", s.Name, s.OK, s.Skipped, s.Damage)
			}
		}
	}
}

// TestDemoSabotaged breaks the guard of every guarded run (private locks,
// private idempotency stores and books, a forged fencing token) to prove the
// demo notices damage where a guard should have prevented it, and exits 1:
// with working guards that path never runs.
func TestDemoSabotaged(t *testing.T) {
	t.Parallel()
	rep := demoJSON(t, exitFail, "--sabotage")
	wantScenarios(t, rep, demo.Names()...)
	if rep.OK {
		t.Error("report ok")
	}
	for _, s := range rep.Scenarios {
		if s.OK || s.Damage.Guarded == 0 {
			t.Errorf("%s: damage with a broken guard not caught: ok=%v damage %+v", s.Name, s.OK, s.Damage)
		}
	}
	if g := decode[jsonPayment](t, scenarioNamed(t, rep, "payment").Guarded); g.Charges < 2 {
		t.Errorf("payment with private stores: %+v", g)
	}
	if g := decode[jsonMessage](t, scenarioNamed(t, rep, "failed-handler").Guarded); !g.Twice {
		t.Errorf("dedup with private stores: %+v", g)
	}
	if g := decode[jsonPaused](t, scenarioNamed(t, rep, "paused-holder").Guarded); g.LateWrite != "applied" {
		t.Errorf("fence with a forged token: %+v", g)
	}
	if g := decode[jsonCrashGuarded](t, scenarioNamed(t, rep, "forgot-to-unlock").Guarded); g.ImmediateTry != "acquired" {
		t.Errorf("forgot-to-unlock with a broken lock: %+v", g)
	}
	if g := decode[jsonStock](t, scenarioNamed(t, rep, "last-item").Guarded); g.Sales < 2 {
		t.Errorf("last-item with a broken lock: %+v", g)
	}
}

// TestDemoDefaults runs the demo with no flags (a SQLite file in a temporary
// directory, locks in it) once, and checks both of its outputs: the text
// report and, for the same run, the JSON one.
func TestDemoDefaults(t *testing.T) {
	t.Parallel()
	var text bytes.Buffer
	rep, err := demo.Run(t.Context(), demo.Options{}, &text)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	jr := parseReport(t, string(js))
	wantScenarios(t, jr, demo.Names()...)
	checkClean(t, jr)
	out := text.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"1. One payment arrives 3 times in 200 ms at two instances",
		"guarded:   4 copies -> 1 charge,",
		"replayed with identical answers ✓",
		"replayed: charge ch_",
		"2. A message handler fails after claiming",
		"(failed, skipped, skipped): the message is lost",
		"3 deliveries (failed, processed, duplicate): took effect 1 time ✓",
		"3. Two concurrent transfers into one account",
		"with the lock, B is 1300",
		"with a version column, B is 1300",
		"4. The last item: 100 buyers at once for 1 item in stock, served 20 at a time",
		"guarded:   1 sale, 99 refused, 0 left ✓",
		"5. A holder paused (SIGSTOP)",
		"write refused: stale token",
		"6. Forgot to unlock",
		"right after the kill: try refused",
		"timeline, unguarded:",
		"timeline, guarded:",
		"✓ every guarded run was clean (6 scenarios,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(out, "\n"); n > 200 {
		t.Errorf("%d lines: the report is not compact", n)
	}
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 100 /* the text report's width */ || strings.ContainsAny(l, "\t\x1b") {
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

	// Scenario 2's consumers start right after scenario 1's report.
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(strings.TrimSpace(sc.Text()), "why:") {
	}
	waitFor(t, 5*time.Second, "a worker process", func() bool { return len(workersUnder(t, tmp)) > 0 })
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

// workersUnder returns the pids of demo workers whose environment names a
// file under dir (their data URL, their TMPDIR).
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
		if len(args) < 2 || args[1] != demo.WorkerCommand {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err == nil && strings.Contains(string(env), dir) {
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
		{args: []string{"help"}, code: exitOK, stdout: "demo ", notStdout: demo.WorkerCommand},
		{args: []string{"--help"}, code: exitOK, stdout: "Commands:"},
		{args: []string{"help", "demo"}, code: exitOK, stdout: "--backend URL", notStdout: "sabotage"},
		{args: []string{"help", "nope"}, code: exitUsage, stderr: "unknown command"},
		{args: []string{"version"}, code: exitOK, stdout: "latchkey "},
		{args: []string{"version", "x"}, code: exitUsage, stderr: "usage"},
		{args: []string{"demo", "-h"}, code: exitOK, stdout: "--json"},
		{args: []string{"demo", "--bogus"}, code: exitUsage, stderr: "flag provided but not defined"},
		{args: []string{"demo", "extra"}, code: exitUsage, stderr: `unexpected argument "extra"`},
		{args: []string{"demo", "--only", "payment,nope"}, code: exitUsage, stderr: `no scenario "nope"`},
		{args: []string{"demo", "--db", "mssql://user:hunter22@h/db"}, code: exitFail, stderr: "unsupported scheme"},
		{args: []string{"demo", "--db", "mysql://user:hunter22@127.0.0.1:1/db?timeout=1s"}, code: exitFail,
			stderr: "opening the data database mysql://user:xxxxx@127.0.0.1:1/db"},
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
