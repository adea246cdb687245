package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The page and its assets. Every URL in them is relative, so that the
// dashboard works wherever it is mounted.
//
//go:embed index.html assets
var files embed.FS

// etags are the embedded files' ETags, by path: embedded files have no
// modification time, so a browser revalidates them by content.
var etags = sync.OnceValue(func() map[string]string {
	m := make(map[string]string)
	fs.WalkDir(files, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[p] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return m
})

// contentSecurityPolicy lets the page load nothing but its own assets and
// API: no inline script, no other origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

// servePage serves the page.
func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	serveFile(w, r, "index.html")
}

// serveAsset serves GET assets/...: the embedded files under assets/.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	serveFile(w, r, strings.TrimPrefix(r.URL.Path, "/"))
}

// serveFile serves the embedded file at name, revalidated by its ETag.
func serveFile(w http.ResponseWriter, r *http.Request, name string) {
	tag, ok := etags()[name]
	if !ok { // directories too: there is no listing
		http.NotFound(w, r)
		return
	}
	b, err := files.ReadFile(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
