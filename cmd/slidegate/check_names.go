package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/slidegate/slidegate"
)

// hostNotes returns a note for each rule of r whose resource reads as a
// method and a host without a port ("GET 127.0.0.1"). httpguard.Transport
// names a call by its method and its URL's host, which keeps the URL's
// port: a rule on the host alone never sees the calls to
// http://127.0.0.1:9101, and nothing else tells.
func hostNotes(r slidegate.Rules) []string {
	var notes []string
	note := func(place, resource string) {
		method, host, _ := strings.Cut(resource, " ")
		if !portless(method, host) {
			return
		}
		notes = append(notes, fmt.Sprintf("%s (resource %q): names a host without a port: the rule sees only calls to URLs without one; httpguard.Transport names a call to http://%s:9101 %q",
			place, resource, host, method+" "+host+":9101"))
	}
	for i, f := range r.Flow {
		note(fmt.Sprintf("flow[%d]", i), f.Resource)
	}
	for i, b := range r.Breakers {
		note(fmt.Sprintf("breakers[%d]", i), b.Resource)
	}
	return notes
}

// portless reports whether method is an HTTP method and host a host
// without a port: no path, no colon but within an IPv6 literal's brackets.
func portless(method, host string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	if host == "" || strings.ContainsAny(host, "/ ()") {
		return false
	}
	if strings.HasPrefix(host, "[") {
		return strings.HasSuffix(host, "]")
	}
	return !strings.Contains(host, ":")
}
