package compare

import (
	"os"
	"testing"
)

// TestMain stops the redis-server the Redis rows started, if any, once every
// test and benchmark has run.
func TestMain(m *testing.M) {
	code := m.Run()
	StopRedis()
	os.Exit(code)
}
