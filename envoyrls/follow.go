package envoyrls

import (
	"context"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watching a directory: a change is read once the directory has been
// quiet for settle, and read again, every poll, in case a change was not
// told (a file behind a symbolic link into another directory).
const (
	settle = 100 * time.Millisecond
	poll   = 5 * time.Second
)

// Follow puts the config of dir in force, then keeps it in step with the
// directory until ctx is done. A config with a problem when Follow starts
// is an error, and nothing is followed. Later, a config with a problem is
// logged with every problem at Warn, and the one in force stays.
//
// Follow watches the directory and reads it again once it has been quiet
// for 100 ms, and every 5 s besides. A Kubernetes ConfigMap's update,
// which swaps a symbolic link, is one change.
func (s *Service) Follow(ctx context.Context, dir string) error {
	c, sum, err := loadDir(dir)
	if err != nil {
		s.stats.refused.Add(1)
		return err
	}
	if err := s.SetConfig(c); err != nil {
		s.stats.refused.Add(1)
		return err
	}
	s.stats.loads.Add(1)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("envoyrls: watching %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("envoyrls: watching %s: %w", dir, err)
	}
	s.log.Info("rate limit config loaded", "dir", dir, "domains", len(c.domains), "files", c.files)
	go s.follow(ctx, w, dir, sum)
	return nil
}

func (s *Service) follow(ctx context.Context, w *fsnotify.Watcher, dir string, sum uint64) {
	defer w.Close()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	refused := uint64(0) // the sum of the last config refused, logged once
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			quiet.Reset(settle)
			continue
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			s.log.Warn("rate limit config: watching", "dir", dir, "err", err)
			continue
		case <-quiet.C:
		case <-tick.C:
		}
		c, got, err := loadDir(dir)
		s.reads.Add(1)
		switch {
		case got == sum && err == nil:
		case err != nil:
			if got != refused {
				s.stats.refused.Add(1)
				refused = got
				s.log.Warn("rate limit config refused; the one in force stays", "dir", dir, "problems", err.Error())
			}
		default:
			if err := s.SetConfig(c); err != nil {
				s.stats.refused.Add(1)
				s.log.Warn("rate limit config refused; the one in force stays", "dir", dir, "err", err)
				continue
			}
			s.stats.loads.Add(1)
			sum, refused = got, 0
			s.log.Info("rate limit config reloaded", "dir", dir, "domains", len(c.domains), "files", c.files)
		}
	}
}
