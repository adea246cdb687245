// Package rulefile reads a guard's rules from YAML and JSON files, and keeps
// a guard's rules in step with a file as it changes, or with any other
// source of rules: a configuration service, a Kubernetes object.
//
// # Rules files
//
// A rules file holds a slidegate.Rules, with the field names of its json and
// yaml tags and durations written as "500ms":
//
//	flow:
//	  - resource: GET /orders
//	    limit: 100
//	    interval: 1s
//	  - resource: GET /orders
//	    type: concurrency
//	    limit: 20
//	breakers:
//	  - resource: mysql
//	    strategy: error_ratio
//	    threshold: 0.5
//	    open_timeout: 5s
//
// Reading is strict, and reports every problem of a file at once, each with
// its line, its rule and its field, in words rather than a parser's:
//
//	line 3: flow[0] (resource "GET /orders"): unknown field "limt" (did you mean "limit"?)
//	line 9: flow[1] (resource "GET /orders"): limit: "ten" is not a whole number
//	line 12: breakers[0] (resource "mysql"): open_timeout: "5 seconds" is not a duration: write it as 500ms, 2s or 1m30s
//
// A file with any problem is never applied in part. A YAML file holds one
// document: a second one ("---") is refused rather than ignored. A file
// with no rules (empty, only comments, or "flow:" with nothing under it) is
// refused too, since that is how a file cut short reads; "flow: []" (or {}
// in JSON) clears the rules. The package is separate from slidegate so
// that the core packages depend on the standard library only.
//
// # Rule sources
//
// A Source is where rules come from: File(path) is a rules file, and a
// small module of its own can make one of a key in etcd, Consul, Nacos or
// Apollo, or of a Kubernetes object. Follow puts a source's rules in force
// in a guard and keeps them in step with it until Close; Watch is Follow
// of File. Whenever the source signals
// a change, Follow reads its rules and, if they differ from those it read
// last, puts them in force: Guard.SetRules validates the whole set first,
// and rules with any problem are refused whole, logged at Warn with every
// problem, and the rules in force stay. A source that cannot be read (its
// server down) leaves the rules in force too; Follow logs it once, reads it
// again after 1 s, 2 s, 4 s… up to every 30 s, and logs once more when it
// can read it again.
//
// A service that starts while its source is down, or holds rules with a
// problem, would start with no rules at all. WithLastGood(path) prevents
// that: Follow writes each set of rules it puts in force to path, as JSON,
// in a new file renamed over the old so that path always holds a whole set,
// and when it starts and the source has no sound rules to give, it puts
// the rules of path in force, logs why, and follows the source until it
// has. Without a last good file, Follow returns the source's error.
//
// Writing a source takes the three methods of Source: Rules fetches the
// document and Parses it, so that its problems are reported as a file's
// are, each with its line; Changes is a channel with a buffer of one that
// the client's watch sends to without blocking; Close stops the watch and
// closes the channel. With a client for the service (here a KV with Get,
// and a watch run on a goroutine of the source's own):
//
//	type consulSource struct {
//		kv      *KV
//		key     string
//		changes chan struct{} // make(chan struct{}, 1)
//		stop    func()        // ends the watch and waits for it (sync.OnceFunc)
//	}
//
//	func (s *consulSource) Rules(ctx context.Context) (slidegate.Rules, error) {
//		doc, err := s.kv.Get(ctx, s.key)
//		if err != nil {
//			return slidegate.Rules{}, err // Follow tries again later
//		}
//		return rulefile.Parse(s.key, doc) // ".json" in the key: JSON, else YAML
//	}
//
//	func (s *consulSource) Changes() <-chan struct{} { return s.changes }
//	func (s *consulSource) Close() error             { s.stop(); return nil }
//	func (s *consulSource) String() string           { return "consul:" + s.key }
//
// The watch (a blocking query, a Nacos listener, an informer) does
// select { case s.changes <- struct{}{}: default: } on every change, and
// closes s.changes when it ends, whether stopped or failed for good;
// Follow does the rest. What comes from the network is bounded before it
// is parsed: a document larger than a rules file can sensibly be (read it
// through an io.LimitReader; MaxFileSize bounds files) is an error of
// Rules, not a cost of Parse.
//
// # Changing a watched file
//
// Watch keeps a guard's rules in step with a file. The safe way to change
// the file is to write the new content to a temporary file in the same
// directory and rename it over the old one (os.Rename, mv, or an editor
// that saves that way): the watcher then reads the old file or the new,
// never a part of one.
//
// A file rewritten in place (truncated, then written) passes through states
// that hold a part of it, and the watcher guards against reading one:
//
//   - it reads the file only when two reads a settle time apart (50 ms,
//     WithSettle) agree, so a writer still writing is waited for;
//   - a YAML file whose last line has no newline looks cut short
//     ("limit: 1" of "limit: 100"), and must stay unchanged for 1 s;
//   - a file with any problem is refused and the rules in force stay: a
//     JSON file cut short never parses, and a YAML one seldom does, lacks
//     a rule's required field (the limit of a flow rule other than a shed or
//     adaptive one, whose limit 0 blocks nothing), or has a list with
//     nothing under it.
//
// What no watcher can tell is a writer that pauses for longer than those
// waits with its file cut at the end of a line, where what it wrote so far
// is a valid rules file of its own: the rules before the cut, or a last rule
// without the optional fields after it. That part is put in force until the
// rest arrives and the whole file replaces it. Write and rename to rule
// this out.
//
// # Kubernetes ConfigMaps
//
// A ConfigMap mounted as a volume directory is followed. kubelet updates
// it by writing the new files into a new directory
// (..2006_01_02_15_04_05.000000000), pointing a symbolic link ..data_tmp
// at it, renaming ..data_tmp over ..data in one step, and removing the old
// directory; the file in the mount (rules.yaml) is a link to
// ..data/rules.yaml. The watcher sees the rename in the mount's directory
// and reads the file through its links afresh, so it finds the new content
// whole. Give Watch the path in the mount (/etc/slidegate/rules.yaml). The
// update reaches the pod kubelet's sync period and the ConfigMap cache's
// lifetime after the ConfigMap changes, a minute or so, not at once.
//
// A ConfigMap mounted with subPath is never updated: kubelet bind-mounts
// the file as it was when the container started and never changes it, so
// there is nothing for the watcher to see. Mount the ConfigMap as a
// directory, without subPath, for the rules to follow it; otherwise restart
// the pod to take a new version.
package rulefile
