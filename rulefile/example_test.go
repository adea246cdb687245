package rulefile_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/rulefile"
)

// memorySource is a Source that holds its rules in memory: a configuration
// service's client would fetch a document instead, and Parse it.
type memorySource struct {
	mu      sync.Mutex
	rules   slidegate.Rules
	closed  bool
	changes chan struct{} // a buffer of one: changes in a burst make one read
}

func newMemorySource(r slidegate.Rules) *memorySource {
	return &memorySource{rules: r, changes: make(chan struct{}, 1)}
}

func (s *memorySource) Rules(ctx context.Context) (slidegate.Rules, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rules, nil
}

func (s *memorySource) Changes() <-chan struct{} { return s.changes }

func (s *memorySource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.changes)
	}
	return nil
}

func (s *memorySource) String() string { return "memory" }

// set changes the rules and tells the follower, without waiting for it.
func (s *memorySource) set(r slidegate.Rules) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = r
	if !s.closed {
		select {
		case s.changes <- struct{}{}:
		default: // a change is pending already: its read will see this one
		}
	}
}

func ExampleFollow() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	src := newMemorySource(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 100}}})
	reloads := make(chan error, 1)
	f, err := rulefile.Follow(g, src,
		rulefile.WithLogger(slog.New(slog.DiscardHandler)),
		rulefile.OnReload(func(err error) { reloads <- err }))
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Println("limit:", g.Rules().Flow[0].Limit)

	src.set(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: -1}}})
	fmt.Println("refused:", <-reloads != nil, "limit:", g.Rules().Flow[0].Limit)

	src.set(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 50}}})
	fmt.Println("reloaded:", <-reloads == nil, "limit:", g.Rules().Flow[0].Limit)
	// Output:
	// limit: 100
	// refused: true limit: 100
	// reloaded: true limit: 50
}
