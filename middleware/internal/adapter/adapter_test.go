package adapter

import (
	"testing"
	"time"
)

func TestRetryAfterSecondsRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		1: 1, time.Second: 1, time.Second + 1: 2, 1500 * time.Millisecond: 2, time.Minute: 60,
	} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
