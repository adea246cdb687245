package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
)

// A syncWriter lets the demo's report and its event printer write lines to
// one output from their goroutines: each Write is one line, whole.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// maxChangesShown is how many changes of a reload the demo prints, one a
// line; it says how many more there were.
const maxChangesShown = 5

// printEvents prints the guard's events as they happen, from now on, a
// line each, stamped with the time since start: breakers changing state,
// rules reloaded (and what changed), rules whose resource no request
// entered, the cluster's health, the resource table full. Refused rules are not printed: the rules file's follower
// logs them, naming the file. The returned func stops the printing; no line
// is printed after it returns.
func printEvents(g *slidegate.Guard, start time.Time, out io.Writer) (stop func()) {
	var mu sync.Mutex
	stopped := false
	stopListening := g.OnEvent(func(e slidegate.Event) {
		line := eventLine(e)
		if line == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			fmt.Fprintf(out, "%s  %s", stamp(time.Since(start)), line)
		}
	})
	return func() {
		stopListening() // events queued already may still come: stopped drops them
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}

// eventLine describes e in the lines the demo prints, each ending in a
// newline, the lines after the first indented; "" for an event it does not
// print.
func eventLine(e slidegate.Event) string {
	switch e.Kind {
	case "breaker_changed":
		t := e.Breaker
		change := fmt.Sprintf("%v → %v", t.From, t.To)
		if t.To == breaker.Open {
			change = t.String() // why, and for how long
		}
		return fmt.Sprintf("breaker %s on %s: %s\n", e.Rule, e.Resource, change)
	case "rules_changed":
		if len(e.Changes) == 0 {
			return "rules reloaded: nothing changed\n"
		}
		n := len(e.Changes) + e.MoreChanges
		s := fmt.Sprintf("rules reloaded: %d change%s\n", n, plural(n))
		for i, c := range e.Changes {
			if i == maxChangesShown {
				break
			}
			s += "           " + c.String() + "\n"
		}
		if more := n - min(len(e.Changes), maxChangesShown); more > 0 {
			s += fmt.Sprintf("           and %d more\n", more)
		}
		return s
	case "cluster_changed", "resources_full", "rules_unused":
		return e.String() + "\n"
	}
	return ""
}
