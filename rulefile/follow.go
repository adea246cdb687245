package rulefile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/hooks"
)

// A Follower keeps a guard's rules in step with a [Source]. Whenever the
// source signals a change ([Source.Changes]), it reads the source's rules.
// If they differ from the rules it read last ([reflect.DeepEqual]), it
// puts them in force with [slidegate.Guard.SetRules]. SetRules validates
// the whole set first. Rules with any problem are refused, and the rules
// in force stay in force. Every outcome is logged ([WithLogger]) and
// reported to [OnReload].
//
// A source that cannot be read leaves the rules in force as they are.
// That is a source whose Rules returns an error other than a
// [*slidegate.RulesError], such as its server down or its file missing.
// The follower logs it once at Warn. It reads the source again after 1 s,
// then 2 s, 4 s and so on, up to every 30 s, on the [WithClock] clock. It
// also reads it whenever the source signals a change. It logs at Info once
// it can read the source again.
//
// A source whose Changes channel closes while the follower follows it has
// stopped for good. The follower logs it and stops, and the rules in force
// stay.
//
// With [WithLastGood], the follower writes each set of rules it puts in
// force to a file. It puts that file's rules in force when Follow starts
// and the source has no sound rules to give.
//
// A Follower's methods are safe for concurrent use.
type Follower struct {
	g        *slidegate.Guard
	src      Source
	log      *slog.Logger
	onReload func(error)
	clock    clock.Clock
	lastGood string
	retries  bool // an unreadable source is read again on a timer; a file source tells when it comes back
	say      words

	// Owned by Follow until run starts, then by run.
	judged      slidegate.Rules // the rules the source gave when last read, unless judgedErr
	judgedErr   string          // the *slidegate.RulesError it gave instead, or ""
	haveJudged  bool            // judged or judgedErr holds a read
	outcome     error           // what came of it: nil if put in force, else why refused
	down        bool            // the last read failed: an outage is under way
	delay       time.Duration   // the wait before the next timed read while down
	retryGen    uint64          // the generation of the timed read pending, if retryActive
	retryStop   context.CancelFunc
	retryActive bool

	retry   chan uint64 // a timed read is due, for the generation sent
	ctx     context.Context
	stop    context.CancelFunc
	waits   sync.WaitGroup
	done    chan struct{}
	closing sync.Once
	closed  error
}

// words are a follower's log messages, which name a file source's rules
// "rules file", as Watch always has, and any other's "rules".
type words struct {
	key                                                   string // the attribute naming the source: "file" or "source"
	name                                                  string // the source's name
	loaded, reloaded, refused, unreadable, readable, gone string
}

func wordsFor(src Source) words {
	noun, key := "rules", "source"
	if _, ok := src.(*fileSource); ok {
		noun, key = "rules file", "file"
	}
	name := fmt.Sprintf("%T", src)
	if s, ok := src.(fmt.Stringer); ok {
		name = s.String()
	}
	return words{
		key:        key,
		name:       name,
		loaded:     "slidegate: " + noun + " loaded",
		reloaded:   "slidegate: " + noun + " reloaded",
		refused:    "slidegate: " + noun + " refused; the rules in force stay",
		unreadable: "slidegate: " + noun + " cannot be read; the rules in force stay",
		readable:   "slidegate: " + noun + " can be read again",
		gone:       "slidegate: rules source stopped; the rules in force stay",
	}
}

// Follow puts the rules of src in force in g. Then it follows src,
// putting its rules in force whenever they change, until
// [Follower.Close]. Follow takes src over: Close closes it, and so does
// Follow when it returns an error.
//
// If src cannot be read now, or its rules have a problem, Follow turns to
// the [WithLastGood] file. If there is one and its rules are sound, Follow
// puts them in force, logs at Warn why, and follows src. Otherwise it
// returns the error and follows nothing. For rules with a problem the
// error is a [*slidegate.RulesError]. A bad option, a nil g or a nil src
// is an error matching [slidegate.ErrInvalidConfig].
//
// The first read takes as long as src.Rules does. A Source bounds its own
// reads (etcdrules.WithTimeout).
func Follow(g *slidegate.Guard, src Source, opts ...Option) (*Follower, error) {
	return follow(context.Background(), g, src, opts)
}

func follow(ctx context.Context, g *slidegate.Guard, src Source, opts []Option) (*Follower, error) {
	if src == nil {
		return nil, fmt.Errorf("%w: source = nil: give a Source such as File(path)", errInvalidConfig)
	}
	s, err := newSettings(opts)
	if err == nil && g == nil {
		err = fmt.Errorf("%w: guard = nil: give the guard to put the rules in force in", errInvalidConfig)
	}
	if err != nil {
		src.Close()
		return nil, err
	}
	_, isFile := src.(*fileSource)
	f := &Follower{g: g, src: src, log: s.log, onReload: s.onReload, clock: s.clock, lastGood: s.lastGood,
		retries: !isFile, say: wordsFor(src), delay: retryFirst, retry: make(chan uint64), done: make(chan struct{})}
	f.ctx, f.stop = context.WithCancel(ctx)
	if err := f.start(); err != nil {
		f.stop()
		src.Close()
		return nil, err
	}
	go f.run()
	return f, nil
}

// start makes the first read of the source and puts its rules in force, or
// the last good rules, or returns why it cannot.
func (f *Follower) start() error {
	r, srcErr := f.src.Rules(f.ctx)
	var rerr *slidegate.RulesError
	unreadable := srcErr != nil && !errors.As(srcErr, &rerr)
	err := srcErr
	if err == nil {
		if err = f.g.SetRules(r); err == nil {
			f.haveJudged, f.judged = true, r
			f.log.Info(f.say.loaded, f.say.key, f.say.name)
			f.saveLastGood(r)
			return nil
		}
	}
	if unreadable && f.ctx.Err() != nil {
		return err // cancelled while reading
	}
	if srcErr != nil && !unreadable {
		hooks.ReportRefused(f.g, f.say.name, srcErr)
	}
	if f.lastGood == "" || !f.loadLastGood(err) {
		return err
	}
	if unreadable {
		f.down = true
		f.retryLater()
		return nil
	}
	// Rules with a problem are judged: the same rules read again are not
	// refused again, nor logged.
	f.haveJudged, f.outcome = true, err
	if srcErr != nil {
		f.judgedErr = srcErr.Error()
	} else {
		f.judged = r
	}
	return nil
}

// run reads the source whenever it signals a change or a timed read is
// due, until Close or until the source closes its Changes channel.
func (f *Follower) run() {
	defer close(f.done)
	changes := f.src.Changes()
	for {
		select {
		case <-f.ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				if f.ctx.Err() == nil {
					f.log.Warn(f.say.gone, f.say.key, f.say.name)
				}
				return
			}
			f.read()
		case gen := <-f.retry:
			if f.retryActive && gen == f.retryGen {
				f.retryActive = false
				f.read()
			}
		}
	}
}

// read reads the source and judges what it gives.
func (f *Follower) read() {
	r, err := f.src.Rules(f.ctx)
	if f.ctx.Err() != nil {
		return // closing: what was read is judged by nobody
	}
	var rerr *slidegate.RulesError
	if err != nil && !errors.As(err, &rerr) {
		if !f.down {
			f.down = true
			f.log.Warn(f.say.unreadable, f.say.key, f.say.name, "err", err)
			f.reloaded(err)
		}
		if !f.retryActive {
			f.retryLater()
		}
		return
	}
	wasDown := f.down
	if wasDown {
		f.down, f.delay = false, retryFirst
		f.cancelRetry()
		f.log.Info(f.say.readable, f.say.key, f.say.name)
	}
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	if f.haveJudged && errText == f.judgedErr && reflect.DeepEqual(r, f.judged) {
		// Nothing changed, unless the outage hid it: then the outcome
		// is what it was before.
		if wasDown {
			f.reloaded(f.outcome)
		}
		return
	}
	f.haveJudged, f.judged, f.judgedErr = true, r, errText
	if err != nil {
		hooks.ReportRefused(f.g, f.say.name, err) // the guard's event: SetRules never saw them
	} else if err = f.g.SetRules(r); err == nil {
		f.saveLastGood(r)
	}
	f.outcome = err
	if err != nil {
		f.log.Warn(f.say.refused, f.say.key, f.say.name, "err", err)
	} else {
		f.log.Info(f.say.reloaded, f.say.key, f.say.name)
	}
	f.reloaded(err)
}

// reloaded tells OnReload's function, if any.
func (f *Follower) reloaded(err error) {
	if f.onReload != nil {
		f.onReload(err)
	}
}

// retryLater makes a timed read due after the current delay, and doubles
// the delay for the next, up to retryMost. A source that tells when it can
// be read again (a file) gets none.
func (f *Follower) retryLater() {
	if !f.retries {
		return
	}
	d := f.delay
	f.delay = min(2*d, retryMost)
	f.retryGen++
	gen := f.retryGen
	ctx, cancel := context.WithCancel(f.ctx)
	f.retryStop, f.retryActive = cancel, true
	f.waits.Add(1)
	go func() {
		defer f.waits.Done()
		defer cancel()
		if clock.Sleep(ctx, f.clock, d) == nil {
			select {
			case f.retry <- gen:
			case <-ctx.Done():
			}
		}
	}()
}

// cancelRetry drops the timed read pending, if any.
func (f *Follower) cancelRetry() {
	if f.retryActive {
		f.retryStop()
		f.retryActive = false
	}
}

// Close stops following the source and waits until the follower has
// stopped. Then it closes the source and returns the source's Close error.
// The rules in force stay. Close is safe to call more than once, and
// returns the same error each time.
func (f *Follower) Close() error {
	f.closing.Do(func() {
		f.stop()
		<-f.done
		f.waits.Wait()
		f.closed = f.src.Close()
	})
	return f.closed
}
