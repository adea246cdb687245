// Package etcdrules keeps a guard's rules in a key of etcd: a Source reads
// the rules document at the key and tells when it changes, and
// rulefile.Follow puts the rules in force and keeps them in step.
//
//	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379"}})
//	...
//	src, err := etcdrules.New(client, "/slidegate/rules")
//	...
//	follower, err := rulefile.Follow(g, src, rulefile.WithLastGood("/var/lib/myservice/rules.json"))
//	...
//	defer client.Close()
//	defer follower.Close() // closes src too, before the client
//
// The value at the key is a rules document, as a rules file holds it (see
// package rulefile): YAML, or JSON when the key ends in ".json" or
// WithJSON is given. Writing a new value puts new rules in force:
//
//	etcdctl put /slidegate/rules "$(cat rules.yaml)"
//
// A document with any problem is refused and the rules in force stay, as
// for a file. So do they when the key is deleted: a key deleted by mistake
// must not lift all protection, so a missing key is an error (ErrNoRules),
// not an empty set of rules; put "flow: []" (or {} at a JSON key) to clear
// the rules. A value larger than 1 MiB (WithMaxSize) is refused unread.
//
// A Source watches the key for as long as it is open and outlives the
// server: while the server is down, reads fail and Follow retries them;
// when the client's connection is back, the Source signals a change, and
// the client's watch resumes and reports what changed meanwhile. With
// rulefile.WithLastGood, a process that starts while etcd is down puts in
// force the rules it last had, and follows the key once etcd is back.
//
// The package is a module of its own, so that the etcd client and its
// dependencies are pulled in only by those who use it. It needs an etcd
// of version 3.4 or later (the v3 API).
package etcdrules
