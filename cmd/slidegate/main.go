// Command slidegate shows slidegate at work and checks rules files.
//
// Usage:
//
//	slidegate demo          run a guarded service with generated traffic,
//	                        the live dashboard and Prometheus metrics
//	slidegate check FILE... validate rules files (YAML or JSON; - is the
//	                        standard input) and print every problem as
//	                        FILE:LINE: RULE: FIELD: REASON; exit status 1 if
//	                        any file has one
//	slidegate serve --config DIR
//	                        answer Envoy's rate limit service from
//	                        envoyproxy/ratelimit's config files, over gRPC
//	                        and JSON, with exact sliding windows
//	slidegate version       print the module's version, the Go version and
//	                        the VCS revision it was built from
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/envoyrls"
	"github.com/slidegate/slidegate/rulefile"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage:
  slidegate demo          run a guarded service with generated traffic, the
                          live dashboard and Prometheus metrics (see
                          slidegate demo --help)
  slidegate check FILE... validate rules files (YAML or JSON) and print every
                          problem as FILE:LINE: RULE: FIELD: REASON; exit
                          status 1 if any file has one (--envoy DIR...:
                          the config directories of slidegate serve)
  slidegate serve --config DIR
                          answer Envoy's rate limit service (ShouldRateLimit)
                          from envoyproxy/ratelimit's config files, over gRPC
                          and JSON, with exact sliding windows (see
                          slidegate serve --help)
  slidegate version       print the module's version, the Go version and the
                          VCS revision it was built from
`

// run runs the command with args and returns its exit status: 0 on success,
// 1 when the command found problems, 2 when it was used wrongly.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "check":
		return check(args[1:], stdout, stderr)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "slidegate: version takes no arguments\n%s", usage)
			return 2
		}
		fmt.Fprintln(stdout, version())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "slidegate: unknown command %q\n%s", args[0], usage)
	return 2
}

const checkUsage = `usage: slidegate check FILE...
       slidegate check --envoy DIR...

Check validates each rules file (YAML, or JSON if its name ends in .json)
and prints every problem of each, as compilers do, so that editors can jump
to them:

  FILE:LINE: RULE (resource "NAME"): FIELD: REASON

A FILE of - is the standard input, read as YAML (JSON is YAML too) and
named stdin: rules kept elsewhere are checked through a pipe, as in
  etcdctl get --print-value-only /slidegate/rules | slidegate check -

then a line for each file: FILE: N problems, or FILE: ok: N flow rules,
N breakers, saying how many of the flow rules are shed and adaptive rules
if any are. A good file's shed rules that read the CPU get a note each: the
program's guard must read one (slidegate.WithCPU), or refuses them. So
does a rule on a method and a host without a port (GET 127.0.0.1): the
calls httpguard.Transport names with a port (GET 127.0.0.1:9101) never
enter it. The exit status is 0 when every file is good, 1 when any file
has a problem or cannot be read, and 2 when check is used wrongly. It fits a
pre-commit hook, which passes it the files that changed. Names after --
are files even when they start with -.

With --envoy, each DIR is a directory of envoyproxy/ratelimit's config
files, one domain each, as slidegate serve --config reads it. Every problem
is printed as DIR/FILE:LINE: DESCRIPTOR: FIELD: REASON, then DIR: N
problems, or DIR: ok: N domains.
`

// check validates the rules files named in args, reporting each by name.
func check(args []string, stdout, stderr io.Writer) int {
	var paths []string
	envoy := false
	for i, a := range args {
		if a == "--" {
			paths = append(paths, args[i+1:]...)
			break
		}
		switch {
		case a == "--envoy" || a == "-envoy":
			envoy = true
			continue
		case a == "-h" || a == "-help" || a == "--help":
			fmt.Fprint(stdout, checkUsage)
			return 0
		case strings.HasPrefix(a, "-") && a != "-":
			fmt.Fprintf(stderr, "slidegate check: unknown flag %s\n%s", a, checkUsage)
			return 2
		}
		paths = append(paths, a)
	}
	if len(paths) == 0 {
		fmt.Fprint(stderr, checkUsage)
		return 2
	}
	status := 0
	for _, path := range paths {
		if envoy {
			if !checkEnvoyDir(path, stdout, stderr) {
				status = 1
			}
			continue
		}
		if !checkFile(path, stdout, stderr) {
			status = 1
		}
	}
	return status
}

// checkFile validates the rules file at path, prints its problems and a
// summary, and reports whether it is good.
func checkFile(path string, stdout, stderr io.Writer) bool {
	var r slidegate.Rules
	var err error
	if path == "-" {
		path = "stdin"
		r, err = parseStdin()
	} else {
		r, err = rulefile.Load(path)
	}
	var re *slidegate.RulesError
	switch {
	case errors.As(err, &re):
		for _, p := range re.Problems {
			at := path
			if p.Line > 0 {
				at += ":" + strconv.Itoa(p.Line)
			}
			p.Line = 0 // said as FILE:LINE, not as "line 4: "
			fmt.Fprintf(stdout, "%s: %s\n", at, p)
		}
		fmt.Fprintf(stdout, "%s: %d problem%s\n", path, len(re.Problems), plural(len(re.Problems)))
		return false
	case err != nil:
		fmt.Fprintf(stderr, "slidegate: %v\n", err)
		return false
	}
	for _, n := range hostNotes(r) {
		fmt.Fprintf(stdout, "%s: note: %s\n", path, n)
	}
	var shed, adaptive int
	for i, f := range r.Flow {
		switch f.Type {
		case slidegate.ShedRule:
			shed++
			if f.CPUThreshold >= 0 {
				fmt.Fprintf(stdout, "%s: note: flow[%d] (resource %q): the shed rule reads the CPU: the guard must read one (slidegate.WithCPU), or set cpu_threshold: -1\n",
					path, i, f.Resource)
			}
		case slidegate.AdaptiveRule:
			adaptive++
		}
	}
	kinds := ""
	if shed+adaptive > 0 {
		kinds = fmt.Sprintf(" (%d shed, %d adaptive)", shed, adaptive)
	}
	fmt.Fprintf(stdout, "%s: ok: %d flow rule%s%s, %d breaker%s\n", path,
		len(r.Flow), plural(len(r.Flow)), kinds, len(r.Breakers), plural(len(r.Breakers)))
	return true
}

// checkEnvoyDir validates the config directory dir of slidegate serve,
// prints its problems and a summary, and reports whether it is good.
func checkEnvoyDir(dir string, stdout, stderr io.Writer) bool {
	c, err := envoyrls.LoadDir(dir)
	var ce *envoyrls.ConfigError
	switch {
	case errors.As(err, &ce):
		for _, p := range ce.Problems {
			p.File = filepath.Join(dir, p.File)
			fmt.Fprintln(stdout, p)
		}
		fmt.Fprintf(stdout, "%s: %d problem%s\n", dir, len(ce.Problems), plural(len(ce.Problems)))
		return false
	case err != nil:
		fmt.Fprintf(stderr, "slidegate: %v\n", err)
		return false
	}
	n := len(c.Domains())
	fmt.Fprintf(stdout, "%s: ok: %d domain%s\n", dir, n, plural(n))
	return true
}

// stdin is what check reads for the file -: the standard input, or what a
// test gives.
var stdin io.Reader = os.Stdin

// maxStdin bounds the rules document check reads from the standard input.
const maxStdin = 16 << 20

// parseStdin reads and parses the rules document on the standard input.
func parseStdin() (slidegate.Rules, error) {
	data, err := io.ReadAll(io.LimitReader(stdin, maxStdin+1))
	if err != nil {
		return slidegate.Rules{}, fmt.Errorf("reading the standard input: %w", err)
	}
	if len(data) > maxStdin {
		return slidegate.Rules{}, fmt.Errorf("the standard input holds more than %d MiB: not a rules document", maxStdin>>20)
	}
	return rulefile.Parse("stdin", data)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
