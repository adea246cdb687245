package rulefile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
)

// A Watcher keeps a guard's rules in step with a rules file. It watches the
// file's directory, and the directory of the file a symbolic link at path
// leads to, and after any change in them it reads the file again (through
// its links, resolved afresh each time) until two reads a settle time apart
// (WithSettle, 50 ms by default) find the same content; that content, if it
// differs from the content last judged, is parsed and its rules put in
// force. A file that cannot be read or has a problem leaves the rules in
// force as they are, and the watcher logs why.
//
// Waiting for two reads to agree follows every way a file is replaced or
// rewritten: in place, by renaming a new file over it, and by swapping a
// symbolic link, as Kubernetes does to a mounted ConfigMap (see the
// package's documentation). A YAML file whose last line has no newline
// looks cut short, and must stay unchanged for 1 s, or the settle time if
// longer, before it is read as complete. The package documentation says
// what no watcher can tell from a file being written.
type Watcher struct {
	g        *slidegate.Guard
	path     string
	log      *slog.Logger
	onLoad   func(error)
	clock    clock.Clock
	settle   time.Duration // the gap between the two reads that must agree
	cutShort time.Duration // that gap for a file that looks cut short
	fsw      *fsnotify.Watcher
	dir      string // filepath.Dir(path), watched from start to Close
	target   string // the directory of the file path leads to, when another; watched too

	// Owned by run.
	judged    []byte // the content last parsed (applied or refused)
	judgedErr string // the read error last reported, or ""
	candidate []byte // a read waiting for a second to agree with it
	candErr   string // the read error of that read
	haveCand  bool

	wake    chan struct{} // a wait has ended
	stop    context.CancelFunc
	ctx     context.Context
	waits   sync.WaitGroup
	done    chan struct{}
	closing sync.Once
	optErr  error // the first bad option
}

// A WatchOption customises a Watcher.
type WatchOption func(*Watcher)

// WithLogger makes the watcher log through l: rules put in force at Info,
// files refused at Warn with every problem. By default it logs through
// slog.Default(). A nil l is an error.
func WithLogger(l *slog.Logger) WatchOption {
	return func(w *Watcher) {
		if l == nil {
			w.bad("logger = nil: give a logger, or leave the option out for slog.Default()")
			return
		}
		w.log = l
	}
}

// ErrInvalidConfig is wrapped by the error Watch returns for a bad option.
// The message names the option and its value.
var ErrInvalidConfig = errors.New("rulefile: invalid configuration")

// bad records a bad option, unless one was found before.
func (w *Watcher) bad(format string, args ...any) {
	if w.optErr == nil {
		w.optErr = fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
}

// OnReload registers f to be called after each reload the watcher makes
// (not the first load), with nil or the reason the file was refused. A
// change in the directory that leaves the file's content as it was judged
// last makes no reload and no call. f is called on the watcher's goroutine:
// the watcher waits for it.
func OnReload(f func(err error)) WatchOption {
	return func(w *Watcher) { w.onLoad = f }
}

// WithSettle sets how long apart the two reads of a changed file that must
// agree are taken, and how long after the first change the first read is:
// 50 ms by default. A writer that pauses longer than this between its
// writes, and does not write a new file and rename it over the old, may
// have a part of its file judged alone (see the package documentation); a
// longer settle time narrows that at the cost of a later reload. A d that
// is not positive is an error.
func WithSettle(d time.Duration) WatchOption {
	return func(w *Watcher) {
		if d <= 0 {
			w.bad("settle = %v: must be positive", d)
			return
		}
		w.settle = d
	}
}

// WithClock makes the watcher wait on c, which tests and simulations advance
// by hand (clock.Manual); by default it waits on real timers. A nil c is an
// error.
func WithClock(c clock.Clock) WatchOption {
	return func(w *Watcher) {
		if c == nil {
			w.bad("clock = nil: give a clock, or leave the option out for real timers")
			return
		}
		w.clock = c
	}
}

// Defaults of a Watcher's waits.
const (
	defaultSettle   = 50 * time.Millisecond
	defaultCutShort = time.Second
)

// Watch puts the rules of the file at path in force in g, then watches the
// file and reloads it whenever it changes, until Close. If the file cannot
// be read or has a problem now, Watch returns the error and watches
// nothing.
func Watch(g *slidegate.Guard, path string, opts ...WatchOption) (*Watcher, error) {
	w := &Watcher{g: g, path: filepath.Clean(path), log: slog.Default(), clock: clock.System,
		settle: defaultSettle, cutShort: defaultCutShort, wake: make(chan struct{}, 1), done: make(chan struct{})}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	if w.optErr != nil {
		return nil, w.optErr
	}
	w.dir = filepath.Dir(w.path)
	data, err := os.ReadFile(w.path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(w.path, data)
	if err != nil {
		return nil, err
	}
	if err := g.SetRules(r); err != nil {
		return nil, err
	}
	w.judged = data
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fsw.Add(w.dir); err != nil {
		fsw.Close()
		return nil, err
	}
	w.fsw = fsw
	w.followTarget()
	w.ctx, w.stop = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// run handles the directories' events until Close. It waits for at most
// one timer at a time: a change while a wait is under way is seen by the
// read that ends it, so a directory busy with other files delays a reload
// by no more than two waits.
func (w *Watcher) run() {
	defer close(w.done)
	waiting := false
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			// Anything but a change of permissions may change what path
			// leads to: the file itself, a link on the way, a directory
			// renamed in place of another.
			if ev.Op == fsnotify.Chmod || waiting {
				continue
			}
			waiting = true
			w.after(w.settle)
		case <-w.wake:
			waiting = w.check()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("slidegate: watching the rules file", "file", w.path, "err", err)
		}
	}
}

// after wakes run once d has passed on the watcher's clock.
func (w *Watcher) after(d time.Duration) {
	w.waits.Add(1)
	go func() {
		defer w.waits.Done()
		if clock.Sleep(w.ctx, w.clock, d) == nil {
			select {
			case w.wake <- struct{}{}:
			case <-w.ctx.Done():
			}
		}
	}()
}

// check reads the file, and judges it if the read agrees with the one
// before; otherwise it keeps the read and waits for the next. It reports
// whether it waits.
func (w *Watcher) check() bool {
	data, err := os.ReadFile(w.path)
	w.followTarget()
	var readErr string
	if err != nil {
		data, readErr = nil, err.Error()
	}
	if readErr == "" && w.judgedErr == "" && bytes.Equal(data, w.judged) || readErr != "" && readErr == w.judgedErr {
		w.haveCand = false // back to what was judged: nothing to do
		return false
	}
	if w.haveCand && readErr == w.candErr && bytes.Equal(data, w.candidate) {
		w.haveCand = false
		w.judge(data, err)
		return false
	}
	w.candidate, w.candErr, w.haveCand = data, readErr, true
	wait := w.settle
	if readErr == "" && looksCutShort(w.path, data) {
		wait = max(w.cutShort, w.settle)
	}
	w.after(wait)
	return true
}

// looksCutShort reports whether data, a YAML file, ends in the middle of a
// line. Editors and YAML writers end a file with a newline, so a file
// without one is likely still being written. JSON needs no such guess: a
// JSON file cut short is not valid JSON.
func looksCutShort(path string, data []byte) bool {
	return !strings.EqualFold(filepath.Ext(path), ".json") && len(data) > 0 && data[len(data)-1] != '\n'
}

// judge parses data, read with readErr, and puts its rules in force, or
// logs why not.
func (w *Watcher) judge(data []byte, readErr error) {
	err := readErr
	if err == nil {
		var r slidegate.Rules
		if r, err = Parse(w.path, data); err == nil {
			err = w.g.SetRules(r)
		}
		w.judged, w.judgedErr = data, ""
	} else {
		w.judged, w.judgedErr = nil, readErr.Error()
	}
	if err != nil {
		w.log.Warn("slidegate: rules file refused; the rules in force stay", "file", w.path, "err", err)
	} else {
		w.log.Info("slidegate: rules file reloaded", "file", w.path)
	}
	if w.onLoad != nil {
		w.onLoad(err)
	}
}

// followTarget watches the directory of the file path leads to, when a
// symbolic link makes it another than path's own, so that a file edited in
// place behind a link is seen; it stops watching the one it watched before.
func (w *Watcher) followTarget() {
	real, err := filepath.EvalSymlinks(w.path)
	if err != nil {
		return // not there now: path's own directory sees it come back
	}
	target := filepath.Dir(real)
	if dir, err := filepath.EvalSymlinks(w.dir); err == nil && dir == target {
		target = ""
	}
	if target == w.target {
		return
	}
	if w.target != "" {
		// It may be gone already (Kubernetes removes the directory of the
		// data it replaced), and its watch with it.
		_ = w.fsw.Remove(w.target)
	}
	w.target = ""
	if target != "" {
		if err := w.fsw.Add(target); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.log.Warn("slidegate: watching the directory the rules file links to", "file", w.path, "dir", target, "err", err)
			return
		}
		w.target = target
	}
}

// Close stops watching and waits until the watcher has stopped. The rules in
// force stay. Close is safe to call more than once.
func (w *Watcher) Close() error {
	var err error
	w.closing.Do(func() {
		w.stop()
		err = w.fsw.Close()
		<-w.done
		w.waits.Wait()
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
