// Package etcdrules keeps a guard's rules in a key of etcd.
//
// A [Source] reads the rules document at the key and tells when it changes.
// [rulefile.Follow] puts the rules in force and keeps them in step:
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
// package [rulefile]). It is YAML, or JSON when the key ends in ".json" or
// [WithJSON] is given. Writing a new value puts new rules in force:
//
//	etcdctl put /slidegate/rules "$(cat rules.yaml)"
//
// A document with any problem is refused, and the rules in force stay. They
// stay too when the key is deleted: a missing key is an error
// ([ErrNoRules]), not an empty set of rules. To clear the rules, put
// "flow: []" at the key, or {} at a JSON key. A value larger than 1 MiB
// ([WithMaxSize]) is refused unread.
//
// A Source watches the key for as long as it is open, and it outlives the
// server. While the server is down, reads fail and Follow retries them.
// When the client's connection is back, the Source signals a change. The
// client's watch then resumes and reports what changed meanwhile. With
// [rulefile.WithLastGood], a process that starts while etcd is down puts in
// force the rules it last had. It follows the key once etcd is back.
//
// The package is a module of its own, so that only its users pull in the
// etcd client. It needs etcd 3.4 or later (the v3 API). The notes in
// docs/etcdrules.md say why a deleted key keeps the rules, how the size
// limit is chosen, and how the watch survives an outage.
package etcdrules
