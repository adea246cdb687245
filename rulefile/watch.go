package rulefile

import (
	"context"

	"github.com/slidegate/slidegate"
)

// A Watcher keeps a guard's rules in step with a rules file: it is a
// Follower of File(path). It watches the file's directory, and the
// directory of the file a symbolic link at path leads to, and after any
// change in them it reads the file again (through its links, resolved
// afresh each time) until two reads a settle time apart (WithSettle, 50 ms
// by default) find the same content; that content's rules, if they differ
// from the rules last judged, are put in force. A file that cannot be read
// or has a problem leaves the rules in force as they are, and the watcher
// logs why.
//
// Waiting for two reads to agree follows every way a file is replaced or
// rewritten: in place, by renaming a new file over it, and by swapping a
// symbolic link, as Kubernetes does to a mounted ConfigMap (see the
// package's documentation). A YAML file whose last line has no newline
// looks cut short, and must stay unchanged for 1 s, or the settle time if
// longer, before it is read as complete. The package documentation says
// what no watcher can tell from a file being written.
type Watcher struct {
	f *Follower
}

// Watch puts the rules of the file at path in force in g, then watches the
// file and reloads it whenever it changes, until Close: it is
// Follow(g, File(path, opts...), opts...). If the file cannot be read or
// has a problem now, Watch returns the error and watches nothing, unless
// WithLastGood names a file of sound rules, which are then put in force
// while the watcher waits for the file to be mended.
func Watch(g *slidegate.Guard, path string, opts ...WatchOption) (*Watcher, error) {
	src, err := File(path, opts...)
	if err != nil {
		return nil, err
	}
	f, err := Follow(g, src, opts...)
	if err != nil {
		return nil, err
	}
	return &Watcher{f: f}, nil
}

// Close stops watching and waits until the watcher has stopped. The rules in
// force stay. Close is safe to call more than once.
func (w *Watcher) Close() error { return w.f.Close() }

// Run is Watch until ctx is done: it returns Watch's error, or nil once ctx
// is done and the watcher has stopped.
func Run(ctx context.Context, g *slidegate.Guard, path string, opts ...WatchOption) error {
	w, err := Watch(g, path, opts...)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return w.Close()
}
