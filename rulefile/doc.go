// Package rulefile reads a guard's rules from YAML and JSON files. It also
// keeps a guard's rules in step with a file as it changes, or with any
// other source of rules, such as a configuration service or a Kubernetes
// object.
//
// # Rules files
//
// A rules file holds a [slidegate.Rules]. Its field names are those of the
// json and yaml tags. Durations are written as "500ms". For example:
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
// Reading is strict. It reports every problem of a file at once. Each
// comes with its line, its rule and its field, in words rather than a
// parser's:
//
//	line 3: flow[0] (resource "GET /orders"): unknown field "limt" (did you mean "limit"?)
//	line 9: flow[1] (resource "GET /orders"): limit: "ten" is not a whole number
//	line 12: breakers[0] (resource "mysql"): open_timeout: "5 seconds" is not a duration: write it as 500ms, 2s or 1m30s
//
// A file with any problem is never applied in part. A YAML file holds one
// document: a second one ("---") is refused rather than ignored. A file
// with no rules is refused too, since that is how a file cut short reads.
// Such a file is empty, holds only comments, or holds "flow:" with nothing
// under it. "flow: []", or {} in JSON, clears the rules.
//
// The package is separate from slidegate, so that the core packages depend
// on the standard library only.
//
// # Rule sources
//
// A [Source] is where rules come from. [File] is a rules file. A small
// module of its own can make a Source of a key in etcd, Consul, Nacos or
// Apollo, or of a Kubernetes object. [Follow] puts a source's rules in
// force in a guard. It keeps them in step with the source until
// [Follower.Close]. [Watch] is Follow of File.
//
// Whenever the source signals a change, Follow reads its rules. If they
// differ from those it read last, it puts them in force.
// [slidegate.Guard.SetRules] validates the whole set first. Rules with any
// problem are refused whole and logged at Warn with every problem. The
// rules in force stay. A source that cannot be read, such as one whose
// server is down, leaves the rules in force too. Follow logs it once. It
// reads the source again after 1 s, 2 s, 4 s… up to every 30 s. It logs
// once more when it can read the source again.
//
// A service that starts while its source is down, or holds rules with a
// problem, would start with no rules at all. [WithLastGood] prevents that.
// Follow writes each set of rules it puts in force to a file, as JSON. The
// file always holds a whole set. When Follow starts and the source has no
// sound rules to give, it puts the rules of that file in force. It logs
// why, and follows the source until the source has sound rules. Without a
// last good file, Follow returns the source's error.
//
// # Writing a source
//
// A source has the three methods of Source. Rules fetches the document and
// calls [Parse], so that its problems are reported as a file's are, each
// with its line. Changes returns a channel with a buffer of one. The
// client's watch sends to it without blocking. Close stops the watch and
// closes the channel. Here is a source for a client with a KV store and a
// watch that runs on a goroutine of the source's own:
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
// The watch may be a blocking query, a Nacos listener or an informer. On
// every change it sends without blocking:
//
//	select {
//	case s.changes <- struct{}{}:
//	default:
//	}
//
// The watch closes s.changes when it ends, whether stopped or failed for
// good. Follow does the rest.
//
// What comes from the network must be bounded before it is parsed. A
// document larger than a rules file can sensibly be is an error of Rules,
// not a cost of Parse. Read it through an [io.LimitReader]. Files are
// bounded (1 MiB).
//
// # Changing a watched file
//
// [Watch] keeps a guard's rules in step with a file. The safe way to
// change the file is to write the new content to a temporary file in the
// same directory, then rename it over the old one. [os.Rename], mv and
// many editors work that way. The watcher then reads the old file or the
// new, never a part of one.
//
// A file rewritten in place (truncated, then written) passes through
// states that hold a part of it. The watcher guards against reading one in
// three ways:
//
//   - It waits for two reads a settle time apart to agree ([WithSettle]).
//   - A YAML file whose last line has no newline must stay unchanged for 1 s.
//   - A file with any problem is refused, and the rules in force stay.
//
// The first waits for a writer still writing, 50 ms by default. The second
// catches a YAML file that looks cut short, such as "limit: 1" of
// "limit: 100". The third refuses most files cut short. A JSON file cut
// short never parses. A YAML file cut short seldom parses. Most that do
// lack a rule's required field, or have a list with nothing under it. The
// limit of a flow rule is required, except in a shed or adaptive rule,
// whose limit 0 blocks nothing.
//
// What no watcher can tell is a writer that pauses longer than those
// waits, with its file cut at the end of a line. What it wrote so far may
// be a valid rules file of its own. That is the rules before the cut, or a
// last rule without the optional fields after it. That part is put in
// force until the rest arrives and the whole file replaces it. Write and
// rename to rule this out.
//
// # Kubernetes ConfigMaps
//
// A ConfigMap mounted as a volume directory is followed. Give Watch the
// path in the mount, such as /etc/slidegate/rules.yaml. kubelet replaces
// the files of the mount in one step, and the watcher finds the new
// content whole. The update reaches the pod a minute or so after the
// ConfigMap changes: kubelet's sync period plus the ConfigMap cache's
// lifetime. docs/rulefile.md says how kubelet updates the mount.
//
// A ConfigMap mounted with subPath is never updated. kubelet bind-mounts
// the file as it was when the container started, and never changes it. So
// there is nothing for the watcher to see. Mount the ConfigMap as a
// directory, without subPath, for the rules to follow it. Otherwise
// restart the pod to take a new version.
package rulefile
