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

// fileSource is the Source File returns. Its goroutine (run) owns the
// settle reads; Rules, on the follower's goroutine, reads only what they
// settled on, under mu.
type fileSource struct {
	path     string
	dir      string // filepath.Dir(path), watched from start to Close
	log      *slog.Logger
	clock    clock.Clock
	settle   time.Duration // the gap between the two reads that must agree
	cutShort time.Duration // that gap for a file that looks cut short
	fsw      *fsnotify.Watcher

	mu       sync.Mutex
	settled  []byte // the content two reads agreed on last, or read by the first Rules
	readErr  error  // or the error those reads returned
	haveRead bool   // settled or readErr holds a read

	// Owned by run.
	target    string // the directory of the file path leads to, when another; watched too
	candidate []byte // a read waiting for a second to agree with it
	candErr   string // the read error of that read
	haveCand  bool

	changes chan struct{} // buffer of one; sent to and closed by run only
	wake    chan struct{} // a wait has ended
	ctx     context.Context
	stop    context.CancelFunc
	waits   sync.WaitGroup
	done    chan struct{}
	closing sync.Once
	closed  error
}

// File returns a [Source] that reads the rules file at path and watches it
// for changes, as the package documentation describes. It watches the
// file's directory, and the directory of the file a symbolic link at path
// leads to. After any change in them, it reads the file again, through its
// links resolved afresh each time. It reads until two reads a settle time
// apart agree ([WithSettle], 50 ms by default). Changes receives a value
// once they agree on content other than the content last settled. Rules
// then returns the rules parsed from the content they agreed on. Its first
// call, before any change has settled, reads the file as it is. A YAML
// file whose last line has no newline looks cut short. It must stay
// unchanged for 1 s, or the settle time if longer, before it is read as
// complete.
//
// Rules returns the error of a file that cannot be read as it is, a
// *fs.PathError. It returns a [*slidegate.RulesError] for a file with
// a problem, such as a size over 1 MiB (of which it reads no
// more). [Follow] does not read a file source again on a timer while the
// file cannot be read: the watch tells when it comes back.
//
// File's source is named path in logs. File takes the options
// [WithSettle], [WithClock] and [WithLogger], the last for the errors of
// the watch itself. It returns an error for a bad option or a directory it
// cannot watch.
func File(path string, opts ...Option) (Source, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	fs := &fileSource{path: filepath.Clean(path), log: s.log, clock: s.clock, settle: s.settle, cutShort: defaultCutShort,
		changes: make(chan struct{}, 1), wake: make(chan struct{}, 1), done: make(chan struct{})}
	fs.dir = filepath.Dir(fs.path)
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("rulefile: watching %s: %w", fs.path, err)
	}
	if err := fsw.Add(fs.dir); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("rulefile: watching the directory of %s: %w", fs.path, err)
	}
	fs.fsw = fsw
	fs.followTarget()
	fs.ctx, fs.stop = context.WithCancel(context.Background())
	go fs.run()
	return fs, nil
}

// String names the source: its path.
func (s *fileSource) String() string { return s.path }

// Rules implements Source. ctx is not needed: a file is read at once.
func (s *fileSource) Rules(ctx context.Context) (slidegate.Rules, error) {
	s.mu.Lock()
	if !s.haveRead {
		s.settled, s.readErr = readFile(s.path)
		s.haveRead = true
	}
	data, err := s.settled, s.readErr
	s.mu.Unlock()
	if err != nil {
		return slidegate.Rules{}, err
	}
	return Parse(s.path, data)
}

// Changes implements Source.
func (s *fileSource) Changes() <-chan struct{} { return s.changes }

// Close implements Source: it stops watching and waits until the source's
// goroutines have ended.
func (s *fileSource) Close() error {
	s.closing.Do(func() {
		s.stop()
		s.closed = s.fsw.Close()
		<-s.done
		s.waits.Wait()
	})
	return s.closed
}

// run handles the directories' events until Close, and closes Changes
// when it ends. It waits for at most one timer at a time: a change while a
// wait is under way is seen by the read that ends it, so a directory busy
// with other files delays a reload by no more than two waits.
func (s *fileSource) run() {
	defer close(s.done)
	defer close(s.changes)
	waiting := false
	for {
		select {
		case ev, ok := <-s.fsw.Events:
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
			s.after(s.settle)
		case <-s.wake:
			waiting = s.check()
		case err, ok := <-s.fsw.Errors:
			if !ok {
				return
			}
			s.log.Warn("slidegate: watching the rules file", "file", s.path, "err", err)
		}
	}
}

// after wakes run once d has passed on the source's clock.
func (s *fileSource) after(d time.Duration) {
	s.waits.Add(1)
	go func() {
		defer s.waits.Done()
		if clock.Sleep(s.ctx, s.clock, d) == nil {
			select {
			case s.wake <- struct{}{}:
			case <-s.ctx.Done():
			}
		}
	}()
}

// check reads the file, and if the read agrees with the one before and
// differs from what settled last, settles on it and signals a change;
// otherwise it keeps the read and waits for the next. It reports whether
// it waits.
func (s *fileSource) check() bool {
	data, err := readFile(s.path)
	s.followTarget()
	var readErr string
	if err != nil {
		data, readErr = nil, err.Error()
	}
	s.mu.Lock()
	if s.haveRead && sameRead(data, readErr, s.settled, s.readErr) {
		s.mu.Unlock()
		s.haveCand = false // back to what settled: nothing to do
		return false
	}
	if s.haveCand && readErr == s.candErr && bytes.Equal(data, s.candidate) {
		s.settled, s.readErr, s.haveRead = data, err, true
		s.mu.Unlock()
		s.haveCand = false
		select {
		case s.changes <- struct{}{}:
		default: // a change is pending already: its read will see this one
		}
		return false
	}
	s.mu.Unlock()
	s.candidate, s.candErr, s.haveCand = data, readErr, true
	wait := s.settle
	if readErr == "" && looksCutShort(s.path, data) {
		wait = max(s.cutShort, s.settle)
	}
	s.after(wait)
	return true
}

// sameRead reports whether a read of data with the error text readErr
// found what an earlier read found (old, with oldErr).
func sameRead(data []byte, readErr string, old []byte, oldErr error) bool {
	if oldErr != nil {
		return readErr == oldErr.Error()
	}
	return readErr == "" && bytes.Equal(data, old)
}

// looksCutShort reports whether data, a YAML file, ends in the middle of a
// line. Editors and YAML writers end a file with a newline, so a file
// without one is likely still being written. JSON needs no such guess: a
// JSON file cut short is not valid JSON.
func looksCutShort(path string, data []byte) bool {
	return !strings.EqualFold(filepath.Ext(path), ".json") && len(data) > 0 && data[len(data)-1] != '\n'
}

// followTarget watches the directory of the file path leads to, when a
// symbolic link makes it another than path's own, so that a file edited in
// place behind a link is seen; it stops watching the one it watched before.
func (s *fileSource) followTarget() {
	real, err := filepath.EvalSymlinks(s.path)
	if err != nil {
		return // not there now: path's own directory sees it come back
	}
	target := filepath.Dir(real)
	if dir, err := filepath.EvalSymlinks(s.dir); err == nil && dir == target {
		target = ""
	}
	if target == s.target {
		return
	}
	if s.target != "" {
		// It may be gone already (Kubernetes removes the directory of the
		// data it replaced), and its watch with it.
		_ = s.fsw.Remove(s.target)
	}
	s.target = ""
	if target != "" {
		if err := s.fsw.Add(target); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("slidegate: watching the directory the rules file links to", "file", s.path, "dir", target, "err", err)
			return
		}
		s.target = target
	}
}
