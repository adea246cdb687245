package envoyrls

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The /json endpoint answers as envoyproxy/ratelimit's: 200 when OK, 429
// when over the limit, 400 for a body that is not a request or breaks a
// bound, 413 for one too large.
func TestTheJSONEndpointAnswersAsEnvoyproxyRatelimits(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	srv := httptest.NewServer(r.svc.JSONHandler())
	defer srv.Close()
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	body := `{"domain": "d", "descriptors": [{"entries": [{"key": "b", "value": "1"}]}]}`
	if code, out := post(body); code != 200 || !strings.Contains(out, `"overallCode":"OK"`) || !strings.Contains(out, `"requestsPerUnit":1`) {
		t.Fatalf("first: %d %s", code, out)
	}
	if code, out := post(body); code != 429 || !strings.Contains(out, `"overallCode":"OVER_LIMIT"`) {
		t.Fatalf("second: %d %s", code, out)
	}
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"domain": `, 400, "not a RateLimitRequest"},
		{`{"domain": "d", "descriptors": []}`, 400, "descriptors: none"},
		{`{"domain": "d", "descriptors": [{"entries": [{"key": "a", "value": "` + strings.Repeat("v", 2<<20) + `"}]}]}`, 413, "too large"},
	} {
		if code, out := post(c.body); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%.40s: %d %q, want %d with %q", c.body, code, out, c.code, c.want)
		}
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}
