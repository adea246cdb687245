package etcdrules_test

import (
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/etcdrules"
	"github.com/slidegate/slidegate/rulefile"
)

// Follow the rules at a key of etcd: put them in force now, and again
// whenever the key changes. With WithLastGood, a process that starts while
// etcd is down puts in force the rules it last had.
func Example() {
	g, err := slidegate.New()
	if err != nil {
		log.Fatal(err)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
		// Bound what the client takes from the network: a little more
		// than the largest rules document read.
		MaxCallRecvMsgSize: 1<<20 + 64<<10, // WithMaxSize's default, 1 MiB
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	src, err := etcdrules.New(client, "/slidegate/rules")
	if err != nil {
		log.Fatal(err)
	}
	follower, err := rulefile.Follow(g, src, rulefile.WithLastGood("/var/lib/orders/rules.json"))
	if err != nil {
		log.Fatal(err) // no rules at the key, and none kept from before
	}
	defer follower.Close() // closes src, before the client

	// ... serve, with g guarding the resources ...
}
