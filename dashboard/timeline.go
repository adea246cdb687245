package dashboard

import (
	"strings"
	"unicode/utf8"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/bounds"
)

// The timeline is the guard's events (slidegate.Event: a breaker changing
// state, rules put in force or refused, the cluster's health changing, the
// resource table full), as the page lists them. The sampler reads the
// guard's latest events each time it reads the guard (Guard.Events) and
// takes those it has not seen, by their Seq; a sample's event carries the
// new ones, a snapshot every one the dashboard keeps, at most
// 128. Events that happened between two samples beyond
// the guard's KeptEvents are not seen: their Seq is missing from the
// timeline.
//
// What an event costs in a frame is bounded whatever it tells: its text is
// cut to maxEventText bytes (a refused rule set's error lists every
// problem, and names resources of up to 256 bytes).

// maxEventText is the longest description of an event that the dashboard
// sends, in bytes: a longer one is cut, at a character, and ends with "…".
const maxEventText = 512

// guardEventJSON is one of the guard's events (slidegate.Event).
type guardEventJSON struct {
	Seq  uint64  `json:"seq"`  // the guard's numbering, from 1, in the order they happened
	Time float64 `json:"time"` // when it happened
	Kind string  `json:"kind"` // slidegate.Event.Kind: "breaker_changed", "rules_changed", "rules_refused", "cluster_changed", "resources_full"
	// Warn marks an event that tells of trouble: a breaker that opened,
	// rules refused, the cluster unhealthy, the resource table full.
	Warn bool   `json:"warn,omitempty"`
	Text string `json:"text"` // slidegate.Event.String on one line, at most maxEventText bytes (describe)
}

// clusterJSON is the guard's cluster's health (slidegate.ClusterHealth),
// present only when the guard has a cluster that reports it.
type clusterJSON struct {
	// State is "healthy", "unhealthy" (the cluster rules' limiters use
	// their fallback) or "misconfigured" (an error that retrying will not
	// fix: Error says which).
	State     string `json:"state"`
	Failures  uint64 `json:"failures"`        // calls to the cluster that failed or timed out
	Fallbacks uint64 `json:"fallbacks"`       // decisions the fallback made instead
	Error     string `json:"error,omitempty"` // on one line, at most maxEventText bytes (describe)
}

// observeEvents takes in the guard's events it has not seen yet: it keeps
// them (the latest 128), and makes them the new events of
// the observation. d.sampling is held.
func (d *Dashboard) observeEvents() {
	d.newEvents = nil // a frame may still hold the previous ones
	for _, e := range d.g.Events() {
		if e.Seq <= d.eventSeq {
			continue
		}
		d.eventSeq = e.Seq
		d.newEvents = append(d.newEvents, d.guardEventOf(e))
	}
	if len(d.newEvents) == 0 {
		return
	}
	// The kept events are made anew, never changed in place, so that a
	// snapshot may encode them after the sampler has moved on.
	n := min(len(d.timeline)+len(d.newEvents), bounds.KeptEvents)
	kept := make([]guardEventJSON, 0, n)
	if drop := len(d.timeline) + len(d.newEvents) - n; drop < len(d.timeline) {
		kept = append(kept, d.timeline[drop:]...)
	}
	kept = append(kept, d.newEvents[max(len(d.newEvents)-n, 0):]...)
	d.timeline = kept
}

// guardEventOf describes e, its text cut to maxEventText bytes.
func (d *Dashboard) guardEventOf(e slidegate.Event) guardEventJSON {
	return guardEventJSON{
		Seq: e.Seq, Time: d.unix(e.At), Kind: e.Kind,
		Warn: e.Kind == "breaker_changed" && e.Breaker.To == breaker.Open ||
			e.Kind == "rules_refused" || e.Kind == "resources_full" || e.Kind == "rules_unused" ||
			e.Kind == "cluster_changed" && !e.Cluster.Healthy,
		Text: describe(e.String()),
	}
}

// describe returns text on one line, at most maxEventText bytes: each line
// break, with the spaces around it, becomes "; " (a *slidegate.RulesError
// lists its problems one per line), and any other control character a
// space. Only the text's first 2×maxEventText bytes are looked at.
func describe(text string) string {
	text = cut(text, 2*maxEventText)
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); {
		c := text[i]
		if c == '\n' || c == '\r' || c == '\t' || c == ' ' {
			j, lineBreak := i, false
			for j < len(text) && (text[j] == '\n' || text[j] == '\r' || text[j] == '\t' || text[j] == ' ') {
				lineBreak = lineBreak || text[j] == '\n' || text[j] == '\r'
				j++
			}
			switch {
			case lineBreak && i > 0 && j < len(text):
				b.WriteString("; ")
			case lineBreak: // at either end
			default:
				b.WriteString(text[i:j])
			}
			i = j
			continue
		}
		if c < 0x20 || c == 0x7f {
			c = ' '
		}
		b.WriteByte(c)
		i++
	}
	return cut(b.String(), maxEventText)
}

// clusterNow reads the health of the guard's cluster: nil without one.
func (d *Dashboard) clusterNow() *clusterJSON {
	h, ok := d.g.ClusterHealth()
	if !ok {
		return nil
	}
	c := &clusterJSON{State: "unhealthy", Failures: h.Failures, Fallbacks: h.Fallbacks}
	switch {
	case h.Err != nil:
		c.State, c.Error = "misconfigured", describe(h.Err.Error())
	case h.Healthy:
		c.State = "healthy"
	}
	return c
}

// cut returns s if it is at most n bytes long, else its longest prefix of
// whole characters that leaves room for "…" within n bytes, and "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	end := n - len(ellipsis)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + ellipsis
}
