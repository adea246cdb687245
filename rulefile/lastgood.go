package rulefile

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/slidegate/slidegate"
)

// saveLastGood writes r to the last-good file, if the follower keeps one,
// and logs why not if it cannot: a failure here must not stop the rules
// just put in force, and the file keeps the set it held before.
func (f *Follower) saveLastGood(r slidegate.Rules) {
	if f.lastGood == "" {
		return
	}
	if err := writeLastGood(f.lastGood, r); err != nil {
		f.log.Warn("slidegate: last good rules not saved; the file keeps the set before", f.say.key, f.say.name, "last_good", f.lastGood, "err", err)
	}
}

// writeLastGood writes r as JSON to path so that path holds either the set
// before or r whole, whatever happens meanwhile: to a new file in path's
// directory (a rename is atomic only within a file system), synced to
// disk before it is renamed over path, so that a crash cannot leave path
// naming a file whose data never reached the disk. The file has mode 0600
// (os.CreateTemp's): rules may name tenants and keys.
func writeLastGood(path string, r slidegate.Rules) (err error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename itself reaches the disk with the directory; a failure to
	// sync it leaves the new file in place, only less certain to survive
	// a crash, so it is not an error.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// loadLastGood puts the last good rules in force because the source gave
// none (why), and reports whether it did. A file that is not there yet says
// nothing; one that cannot be read, or whose rules have a problem, is
// logged and ignored.
func (f *Follower) loadLastGood(why error) bool {
	data, err := os.ReadFile(f.lastGood)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	var r slidegate.Rules
	if err == nil {
		if r, err = parse(f.lastGood, data, true); err == nil {
			err = f.g.SetRules(r)
		}
	}
	if err != nil {
		f.log.Warn("slidegate: last good rules file ignored", "last_good", f.lastGood, "err", err)
		return false
	}
	f.log.Warn("slidegate: no sound rules from the source; the last good rules are put in force", f.say.key, f.say.name, "last_good", f.lastGood, "err", why)
	return true
}
