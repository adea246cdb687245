package echoguard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/middleware/echoguard"
)

// trickle is a request body that a client sends a byte a second, on a
// manual clock.
type trickle struct {
	c    *clock.Manual
	left int
}

func (b *trickle) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	b.c.Advance(time.Second)
	b.left--
	p[0] = 'x'
	return 1, nil
}

// The time a handler waits for a body that trickles in is not response
// time: a slow client does not make the service look slow.
func TestWaitsForTheBodyAreNotResponseTime(t *testing.T) {
	c := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	h := upload(g, c)
	r := httptest.NewRequest("POST", "/upload", io.NopCloser(&trickle{c: c, left: 5}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	st, _ := g.Stats("POST /upload")
	if st.Totals.Succeeded != 1 || st.MaxRT != 2*time.Millisecond {
		t.Fatalf("stats %+v: want one request that took the 2 ms of the service's work, not the 5 s its client took", st)
	}
}

// upload is an echo server guarded by g whose POST /upload reads the body,
// then works 2 ms on c.
func upload(g *slidegate.Guard, c *clock.Manual) http.Handler {
	e := echo.New()
	e.Use(echoguard.Middleware(g))
	e.POST("/upload", func(ctx echo.Context) error {
		_, _ = io.Copy(io.Discard, ctx.Request().Body)
		c.Advance(2 * time.Millisecond)
		return ctx.NoContent(http.StatusOK)
	})
	return e
}
