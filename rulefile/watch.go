package rulefile

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/slidegate/slidegate"
)

// A Watcher keeps a guard's rules in step with a rules file: when the file
// changes, and has then been quiet for 50 ms, it reads it again and puts its
// rules in force. A file that cannot
// be read or has a problem leaves the rules in force as they are, and the
// watcher logs why.
type Watcher struct {
	g       *slidegate.Guard
	path    string
	log     *slog.Logger
	onLoad  func(error)
	fsw     *fsnotify.Watcher
	done    chan struct{}
	closing sync.Once
}

// A WatchOption customises a Watcher.
type WatchOption func(*Watcher)

// WithLogger makes the watcher log through l: rules put in force at Info,
// files refused at Warn with every problem. By default it logs through
// slog.Default().
func WithLogger(l *slog.Logger) WatchOption {
	return func(w *Watcher) {
		if l != nil {
			w.log = l
		}
	}
}

// OnReload registers f to be called after each reload the watcher makes
// (not the first load), with nil or the reason the file was refused.
func OnReload(f func(err error)) WatchOption {
	return func(w *Watcher) { w.onLoad = f }
}

// Watch puts the rules of the file at path in force in g, then watches the
// file and reloads it whenever it changes, until Close. It watches the
// file's directory, so that editors that replace the file (write a new one,
// rename it over the old) are followed. If the file cannot be read or has a
// problem now, Watch returns the error and watches nothing.
func Watch(g *slidegate.Guard, path string, opts ...WatchOption) (*Watcher, error) {
	w := &Watcher{g: g, path: filepath.Clean(path), log: slog.Default(), done: make(chan struct{})}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	if err := Apply(g, w.path); err != nil {
		return nil, err
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fsw.Add(filepath.Dir(w.path)); err != nil {
		fsw.Close()
		return nil, err
	}
	w.fsw = fsw
	go w.run()
	return w, nil
}

// settle is how long the file must be quiet after a change before the
// watcher reads it: one write is often several events, and a file read
// between its truncation and its writing is empty or cut short.
const settle = 50 * time.Millisecond

func (w *Watcher) run() {
	defer close(w.done)
	name := filepath.Base(w.path)
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				quiet.Stop()
				return
			}
			if filepath.Base(ev.Name) != name || !ev.Has(fsnotify.Write|fsnotify.Create|fsnotify.Rename) {
				continue
			}
			quiet.Reset(settle)
		case <-quiet.C:
			w.reload()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("slidegate: watching the rules file", "file", w.path, "err", err)
		}
	}
}

// reload reads the file again and puts its rules in force, or logs why not.
func (w *Watcher) reload() {
	err := Apply(w.g, w.path)
	if err != nil {
		w.log.Warn("slidegate: rules file refused; the rules in force stay", "file", w.path, "err", err)
	} else {
		w.log.Info("slidegate: rules file reloaded", "file", w.path)
	}
	if w.onLoad != nil {
		w.onLoad(err)
	}
}

// Close stops watching and waits until the watcher has stopped. The rules in
// force stay. Close is safe to call more than once.
func (w *Watcher) Close() error {
	var err error
	w.closing.Do(func() {
		err = w.fsw.Close()
		<-w.done
	})
	return err
}

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
