package browsertest_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// buildSlidegate builds the slidegate command into a temporary directory
// and returns its path.
func buildSlidegate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "slidegate")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "cmd", "slidegate")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slidegate: %v\n%s", err, out)
	}
	return bin
}

// startServe runs slidegate serve on the config files given (name:
// content), on loopback ports, and returns its HTTP address. It is stopped
// with SIGTERM when the test ends, and must stop gracefully.
func startServe(t *testing.T, bin string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "serve", "--config", dir, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		serving := regexp.MustCompile(`msg=serving .*http=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		if err := cmd.Wait(); err != nil {
			logMu.Lock()
			defer logMu.Unlock()
			t.Errorf("slidegate serve after SIGTERM: %v\n%s", err, log.String())
		}
	})
	select {
	case a := <-addr:
		return a
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("slidegate serve not serving after 30 s")
		return ""
	}
}

// The dashboard of slidegate serve, loaded in a browser against a real
// serve under traffic, shows the rule's hits and over-limit hits a second,
// and its count of hits grows from one poll to the next.
func TestServeDashboardShowsTheRatesOfARealServeLive(t *testing.T) {
	path := findBrowser()
	if path == "" {
		t.Skip("no chromium binary: install Debian's chromium to run the browser test")
	}
	bin := buildSlidegate(t)
	cfg := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n"
	addr := startServe(t, bin, map[string]string{"edge.yaml": cfg})

	// Some 50 requests a second of one address: 10 allowed, the rest over.
	ctx, stop := context.WithCancel(context.Background())
	var traffic sync.WaitGroup
	defer traffic.Wait()
	defer stop()
	traffic.Go(func() {
		body := `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/json", strings.NewReader(body))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	pg := openBrowser(t, path, nil)
	pg.do("loading the dashboard", chromedp.Navigate("http://"+addr+"/dashboard"))
	row := `document.querySelector('#rules tr[data-domain="edge"][data-rule="remote_address"]')`
	pg.waitUntil("the rule's hits and over-limit hits a second",
		`(() => { const r = `+row+`; return !!r && parseFloat(r.querySelector(".hits").textContent) > 0 &&
			parseFloat(r.querySelector(".over").textContent) > 0 })()`)
	first, err := strconv.Atoi(pg.eval(row + `.querySelector(".total").textContent`))
	if err != nil || first <= 0 {
		t.Fatalf("hits so far %d (%v)", first, err)
	}
	pg.waitUntil("the hits so far to grow", row+`.querySelector(".total").textContent > `+strconv.Itoa(first))
	for _, c := range []struct{ what, expr, want string }{
		{"the columns", `[...document.querySelectorAll("thead th")].map(th => th.textContent).join("|")`,
			"domain|rule|hits /s|over limit /s|near limit /s|shadow /s|hits"},
		{"the status", `document.getElementById("status").textContent`, "live"},
		{"the configs", `document.getElementById("cfg-loaded").textContent + " " + document.getElementById("cfg-refused").textContent`, "1 0"},
		{"Redis", `document.getElementById("redis").textContent`, "not used"},
	} {
		if got := pg.eval(c.expr); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
	if mem := pg.eval(`document.getElementById("mem-limit").textContent`); mem != "64.0 MiB" {
		t.Errorf("key memory limit %q", mem)
	}
	pg.close()
}
