package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
)

// maxRulesBytes bounds the body of PUT api/rules.
const maxRulesBytes = 1 << 20

// serveSnapshot serves api/snapshot: snapshotJSON, of the latest sample.
// The snapshot is encoded once per sample, for every client that asks.
func (d *Dashboard) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	f, err := d.currentSnapshot()
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	d.writeDoc(w, http.StatusOK, f.doc)
}

// serveHistory serves api/history?resource=NAME: the resource's whole
// history (resourceHistoryJSON), which a snapshot may carry only the newest
// points of (WithSnapshotPoints). 404 if the dashboard keeps no resource of
// that name. It costs one resource's history, encoded for the request.
func (d *Dashboard) serveHistory(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("resource")
	var body resourceHistoryJSON
	found := false
	if len(name) <= bounds.MaxNameLength { // no longer name is kept: look no further
		d.sampling.Lock()
		if s := d.series[name]; s != nil {
			body = resourceHistoryJSON{Seq: d.seq, resourceJSON: d.withHistory(s, len(s.ring))}
			found = true
		}
		d.sampling.Unlock()
	}
	if !found {
		httpError(w, http.StatusNotFound, "no resource of that name")
		return
	}
	data, err := json.Marshal(body)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	d.writeDoc(w, http.StatusOK, append(data, '\n'))
}

// writeDoc writes doc, a JSON document and a newline, as the response with
// status, within the write timeout.
func (d *Dashboard) writeDoc(w http.ResponseWriter, status int, doc []byte) {
	rc := http.NewResponseController(w)
	if !d.setWriteDeadline(rc) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(doc)
}

// serveRules serves GET api/rules: the rules in force, as slidegate.Rules
// writes them.
func (d *Dashboard) serveRules(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, d.g.Rules())
}

// putRules serves PUT api/rules: a body of slidegate.Rules in JSON replaces
// the guard's rules.
//
//	200  the rules are in force; the body is the rules in force, every
//	     rule named (Rules.Named), as the page shows them
//	400  the body is not one JSON object of rules (unknown fields included)
//	401  no "Authorization: Bearer" token
//	403  a token that is not WithRuleEditing's
//	405  rule editing is disabled (no WithRuleEditing)
//	413  the body is over 1 MiB
//	422  the rules have problems, listed in the body; the rules in force stay
func (d *Dashboard) putRules(w http.ResponseWriter, r *http.Request) {
	if d.token == nil {
		w.Header().Set("Allow", "GET, HEAD")
		httpError(w, http.StatusMethodNotAllowed, "rule editing is disabled")
		return
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="slidegate"`)
		httpError(w, http.StatusUnauthorized, "a bearer token is required")
		return
	}
	// Compare digests: the comparison takes the same time whatever the
	// token's length, as well as whatever its bytes.
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], d.token[:]) != 1 {
		httpError(w, http.StatusForbidden, "wrong token")
		return
	}

	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRulesBytes))
	dec.DisallowUnknownFields()
	var rules slidegate.Rules
	err := dec.Decode(&rules)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("data after the rules")
		}
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpError(w, http.StatusRequestEntityTooLarge, "the rules are over 1 MiB")
			return
		}
		httpError(w, http.StatusBadRequest, "reading the rules: "+err.Error())
		return
	}

	if err := d.g.SetRules(rules); err != nil {
		var re *slidegate.RulesError
		if !errors.As(err, &re) {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		body := struct {
			Error    string        `json:"error"`
			Problems []problemJSON `json:"problems"`
		}{Error: "the rules have problems; the rules in force stay", Problems: make([]problemJSON, len(re.Problems))}
		for i, p := range re.Problems {
			body.Problems[i] = problemJSON{Place: p.Place(), Field: p.Field, Reason: p.Reason, Message: p.String()}
		}
		writeJSON(w, http.StatusUnprocessableEntity, body)
		return
	}
	writeJSON(w, http.StatusOK, d.g.Rules().Named())
}

// writeJSON writes v as the response, with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// httpError writes {"error": msg} with status.
func httpError(w http.ResponseWriter, status int, msg string) {
	data, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
