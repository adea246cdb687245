package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
)

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeFile writes data to path, failing the test if it cannot.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, good, "flow:\n  - resource: a\n    limit: 10\nbreakers:\n  - resource: a\n    strategy: sre\n")
	writeFile(t, bad, `{"flow":[{"resource":"a","limit":-1},{"resource":"b","limit":1,"type":"queue"}]}`)

	code, out, _ := runCmd("check", good)
	if code != 0 || out != good+": ok: 1 flow rule, 1 breaker\n" {
		t.Fatalf("check good: %d %q", code, out)
	}
	code, out, _ = runCmd("check", bad)
	if code != 1 || !strings.Contains(out, bad+`:1: flow[0] (resource "a"): limit: -1 must not be negative`) ||
		!strings.Contains(out, `flow[1] (resource "b"): type: "queue"`) || !strings.HasSuffix(out, bad+": 2 problems\n") {
		t.Fatalf("check bad: %d\n%s", code, out)
	}
	if code, _, errOut := runCmd("check", filepath.Join(dir, "missing.yaml")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("check missing: %d %q", code, errOut)
	}
}

// check - reads the rules document piped to it, so that rules kept in etcd
// or another source are checked through a pipe.
func TestCheckReadsTheStandardInput(t *testing.T) {
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader("flow:\n  - resource: a\n    limit: 10\n")
	if code, out, _ := runCmd("check", "-"); code != 0 || out != "stdin: ok: 1 flow rule, 0 breakers\n" {
		t.Fatalf("check - of a good document: %d %q", code, out)
	}
	stdin = strings.NewReader("flow:\n  - resource: a\n    limit: -1\n")
	if code, out, _ := runCmd("check", "-"); code != 1 || !strings.Contains(out, "stdin:3: flow[0]") {
		t.Fatalf("check - of a bad document: %d %q", code, out)
	}
	stdin = io.LimitReader(zeros{}, maxStdin+1)
	if code, _, errOut := runCmd("check", "-"); code != 1 || !strings.Contains(errOut, "more than 16 MiB") {
		t.Fatalf("check - of an endless input: %d %q", code, errOut)
	}
}

// zeros reads as spaces without end.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// check takes every file a pre-commit hook gives it, and reports each by
// name, its problems as compilers do (file:line: ...), so that editors jump
// to them.
func TestCheckReportsEveryFileByNameAndLine(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"good.yaml":  "flow:\n  - resource: a\n    limit: 10\n",
		"bad.yaml":   "flow:\n  - resource: a\n    limt: 10\n  - resource: b\n    limit: -1\n",
		"bad.json":   "{\"flow\": [\n  {\"resource\": \"a\", \"limit\": \"ten\"}\n]}",
		"empty.yaml": "",
		"-dash.yaml": "flow: []\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	code, out, errOut := runCmd("check", "good.yaml", "bad.yaml", "bad.json", "empty.yaml", "missing.yaml", "--", "-dash.yaml")
	want := `good.yaml: ok: 1 flow rule, 0 breakers
bad.yaml:3: flow[0] (resource "a"): unknown field "limt" (did you mean "limit"?)
bad.yaml:5: flow[1] (resource "b"): limit: -1 must not be negative
bad.yaml: 2 problems
bad.json:2: flow[0] (resource "a"): limit: "ten" is not a whole number
bad.json: 1 problem
empty.yaml: the file is empty; to clear the rules, write flow: []
empty.yaml: 1 problem
-dash.yaml: ok: 0 flow rules, 0 breakers
`
	if code != 1 || out != want || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("check: status %d, want 1\n%s\nwant\n%s\nstderr: %s", code, out, want, errOut)
	}
	if code, out, _ := runCmd("check", "good.yaml", "--", "-dash.yaml"); code != 0 || strings.Count(out, ": ok: ") != 2 {
		t.Fatalf("check of good files: %d\n%s", code, out)
	}
}

func TestCheckHelp(t *testing.T) {
	for _, flag := range []string{"--help", "-h", "-help"} {
		if code, out, errOut := runCmd("check", flag); code != 0 || !strings.Contains(out, "slidegate check FILE...") || errOut != "" {
			t.Errorf("check %s: %d %q %q, want status 0 and the usage on stdout", flag, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"check"}, {"check", "--nope", "a.yaml"}, {"check", "--"}} {
		if code, _, errOut := runCmd(args...); code != 2 || !strings.Contains(errOut, "usage") {
			t.Errorf("%q: %d %q, want status 2 and the usage", args, code, errOut)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}} {
		if code, _, errOut := runCmd(args...); code != 2 || !strings.Contains(errOut, "usage") {
			t.Errorf("%q: %d %q, want status 2 and the usage", args, code, errOut)
		}
	}
	if code, out, _ := runCmd("help"); code != 0 || !strings.Contains(out, "slidegate check FILE...") {
		t.Errorf("help: %d %q", code, out)
	}
}

// The demo, for real: 27 s of traffic on a free port. Its output must show
// the spike's blocks, the payments breaker opening and closing again, the
// reports blocked in the overload phase with their adaptive limit, and
// the abusive user as the orders' most blocked key.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs for 27 s")
	}
	// The shed rule reads the CPU the demo uses, not the machine's, which
	// other tests keep busy.
	code, out, errOut := runCmd("demo", "--duration", "27s", "--addr", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, out, errOut)
	}
	var spikeBlocks, opened, closedAfter, overloadBlocks, limitShown bool
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// "  21.0s  overload | orders ... | reports  21 ok   0 429s 178 503s  0 failed p99 116ms limit 20, 9 in flight"
		if i := strings.Index(line, "| reports "); i >= 0 && len(f) > 1 && f[1] == "overload" {
			var ok, tooMany, unavailable int
			if _, err := fmt.Sscanf(line[i:], "| reports %d ok %d 429s %d 503s", &ok, &tooMany, &unavailable); err == nil && unavailable >= 40 {
				overloadBlocks = true
			}
			limitShown = limitShown || strings.Contains(line[i:], " limit ")
		}
		if len(f) > 7 && f[1] == "spike" && f[2] == "|" && f[3] == "orders" && f[7] == "429s" {
			var blocked int
			if _, err := fmt.Sscan(f[6], &blocked); err == nil && blocked >= 100 {
				spikeBlocks = true
			}
		}
		if strings.Contains(line, "on GET /api/payments: closed → open") {
			opened = true
		}
		if opened && strings.Contains(line, "on GET /api/payments:") && strings.HasSuffix(line, "→ closed") {
			closedAfter = true
		}
	}
	if !spikeBlocks || !opened || !closedAfter {
		t.Fatalf("spike blocks %v, payments breaker opened %v and closed again %v; output:\n%s", spikeBlocks, opened, closedAfter, out)
	}
	if !overloadBlocks || !limitShown {
		t.Fatalf("overload phase: reports blocked %v, their adaptive limit shown %v; output:\n%s", overloadBlocks, limitShown, out)
	}
	// The abusive user, at three times its limit, is blocked; it is the
	// most blocked key.
	const most = "per-key rules on GET /api/orders: most blocked key " + abusiveUser + " ("
	if i := strings.Index(out, most); i < 0 {
		t.Errorf("the summary does not name %s as the most blocked key:\n%s", abusiveUser, out)
	} else {
		var blocked int
		if _, err := fmt.Sscan(out[i+len(most):], &blocked); err != nil || blocked < 1 {
			t.Errorf("the summary says %q, want %s with requests blocked", strings.SplitN(out[i:], "\n", 2)[0], abusiveUser)
		}
	}
	// The summary says how long the demo ran: 27 s and the time it took to
	// stop, which a busy machine stretches.
	i := strings.LastIndex(out, "stopped after ")
	if i < 0 {
		t.Fatalf("no summary at the end:\n%s", out)
	}
	ran, err := time.ParseDuration(strings.TrimSuffix(strings.Fields(out[i+len("stopped after "):])[0], ":"))
	if err != nil || ran < 27*time.Second {
		t.Errorf("the summary says %q, want a run of 27 s or a little more", strings.SplitN(out[i:], "\n", 2)[0])
	}
}

func TestDemoFlags(t *testing.T) {
	if code, out, _ := runCmd("demo", "--print-rules"); code != 0 || !strings.Contains(out, "resource: GET /api/orders") {
		t.Errorf("--print-rules: %d %q", code, out)
	}
	if code, out, _ := runCmd("demo", "--help"); code != 0 || !strings.Contains(out, "--duration") {
		t.Errorf("--help: %d %q", code, out)
	}
	for _, args := range [][]string{{"--duration", "-1s"}, {"--duration", "soon"}, {"extra"}, {"--nope"}, {"--cpu", "2"}, {"--cpu", "-1"}, {"--cpu", "NaN"}} {
		if code, _, errOut := runCmd(append([]string{"demo"}, args...)...); code != 2 || errOut == "" {
			t.Errorf("demo %q: %d %q, want status 2 and a message", args, code, errOut)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "flow:\n  - resource: a\n    limit: -5\n")
	if code, _, errOut := runCmd("demo", "--rules", bad, "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "limit: -5 must not be negative") {
		t.Errorf("demo with a bad rules file: %d %q", code, errOut)
	}
}

func TestObserveServesMetricsAndTheDashboard(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Do(context.Background(), "a", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	// A key over its limit of 2 an hour, which the metrics and the
	// dashboard show.
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "k", Limit: 2, Interval: slidegate.Duration(time.Hour), PerKey: true}}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_ = g.Do(context.Background(), "k", func() error { return nil }, slidegate.WithKey("abuser"))
	}
	mux := http.NewServeMux()
	stop, err := observe(mux, g)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `slidegate_requests_allowed_total{direction="outbound",resource="a"} 1`) ||
		!strings.Contains(string(body), `slidegate_top_key_requests_blocked{key="abuser",resource="k"} 1`) {
		t.Fatalf("/metrics:\n%s", body)
	}
	resp, err = http.Get(srv.URL + "/slidegate/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"a"`) ||
		!strings.Contains(string(body), `"keys":{"interval":3600,"top":[{"key":"abuser","allowed":2,"blocked":1}]}`) {
		t.Fatalf("/slidegate/api/snapshot: %d\n%s", resp.StatusCode, body)
	}
}

// A rule on a method and a host without its port ("GET 127.0.0.1") is
// valid, and never sees httpguard.Transport's calls to a URL with a port
// ("GET 127.0.0.1:9101"): check notes it, and only it.
func TestCheckNotesAHostWithoutItsPort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, `flow:
  - resource: GET /orders
    limit: 10
  - resource: GET api.example.com:443
    limit: 10
breakers:
  - resource: GET 127.0.0.1
    strategy: error_ratio
    threshold: 0.5
  - resource: POST [::1]
    strategy: error_ratio
    threshold: 0.5
`)
	code, out, _ := runCmd("check", path)
	want := path + `: note: breakers[0] (resource "GET 127.0.0.1"): names a host without a port: the rule sees only calls to URLs without one; httpguard.Transport names a call to http://127.0.0.1:9101 "GET 127.0.0.1:9101"
` + path + `: note: breakers[1] (resource "POST [::1]"): names a host without a port: the rule sees only calls to URLs without one; httpguard.Transport names a call to http://[::1]:9101 "POST [::1]:9101"
` + path + ": ok: 2 flow rules, 2 breakers\n"
	if code != 0 || out != want {
		t.Fatalf("check: status %d\n%s\nwant status 0 and\n%s", code, out, want)
	}
}
