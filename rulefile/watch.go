package rulefile

import "github.com/slidegate/slidegate"

// Watch puts the rules of the file at path in force in g. Then it watches
// the file and reloads it whenever it changes, until [Follower.Close]. It
// is Follow(g, File(path, opts...), opts...).
//
// If the file cannot be read or has a problem now, Watch returns the error
// and watches nothing. With [WithLastGood], the rules of that file are put
// in force instead, and the follower waits for the file to be mended.
//
// Watch watches the file's directory, and that of the file a symbolic link
// at path leads to. After a change there, it reads the file until two
// reads a settle time apart find the same content ([WithSettle], 50 ms by
// default). Those rules, if they changed, are put in force. A file that
// cannot be read, or has a problem, leaves the rules in force, and the
// follower logs why.
//
// Waiting for two reads to agree follows every way a file is replaced:
// rewritten in place, renamed over, or swapped by a symbolic link, as
// Kubernetes does to a mounted ConfigMap. A YAML file whose last line has
// no newline looks cut short. It must stay unchanged for 1 s, or the
// settle time if longer, before it is read. The package documentation
// says what no watcher can tell from a file being written.
func Watch(g *slidegate.Guard, path string, opts ...Option) (*Follower, error) {
	src, err := File(path, opts...)
	if err != nil {
		return nil, err
	}
	return Follow(g, src, opts...)
}
