// Command slidegate shows slidegate at work and checks rules files.
//
// Usage:
//
//	slidegate demo          run a guarded service with generated traffic,
//	                        the live dashboard and Prometheus metrics
//	slidegate check FILE    validate a rules file (YAML or JSON) and print
//	                        every problem; exit status 1 if there is any
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/rulefile"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage:
  slidegate demo          run a guarded service with generated traffic, the
                          live dashboard and Prometheus metrics (see
                          slidegate demo --help)
  slidegate check FILE    validate a rules file (YAML or JSON) and print every
                          problem; exit status 1 if there is any
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
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "slidegate: unknown command %q\n%s", args[0], usage)
	return 2
}

// check validates the rules file named in args.
func check(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprint(stderr, "usage: slidegate check FILE\n")
		return 2
	}
	path := args[0]
	r, err := rulefile.Load(path)
	var re *slidegate.RulesError
	switch {
	case errors.As(err, &re):
		for _, p := range re.Problems {
			fmt.Fprintf(stdout, "%s: %s\n", path, p)
		}
		fmt.Fprintf(stdout, "%s: %d problem%s\n", path, len(re.Problems), plural(len(re.Problems)))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "slidegate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok: %d flow rule%s, %d breaker%s\n", path,
		len(r.Flow), plural(len(r.Flow)), len(r.Breakers), plural(len(r.Breakers)))
	return 0
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
