package redisflow

import (
	"fmt"
	"time"
)

// A keyedReply is the keyed script's answer, decoded and checked against
// what the script can answer.
type keyedReply struct {
	// window is the window that refused the permits (0-based), -1 when
	// they were granted.
	window int
	// retry, for a refusal, is when the permits would fit that window if
	// nothing else were granted meanwhile: at least 1µs, and at most the
	// window's maxRetry.
	retry time.Duration
	// now is the server's time (TIME), in microseconds.
	now int64
}

// keyedRefusalFields name the elements of the keyed script's refusal, in
// order.
var keyedRefusalFields = [...]string{"window", "retry", "now"}

// decodeKeyedReply decodes v, Redis's answer to a run of the keyed script
// for windows: a positive integer (the server's time) for a grant, an
// array of three integers for a refusal. It returns an error wrapping
// ErrMalformedReply for anything the script cannot answer, naming the
// element and its type or value but never copying the reply, whose size the
// server chose. It does not allocate unless the reply is malformed.
func decodeKeyedReply(v any, windows []keyWindow) (keyedReply, error) {
	switch v := v.(type) {
	case int64:
		if v <= 0 {
			return keyedReply{}, fmt.Errorf("%w: the keyed script granted at %dµs; want a positive time", ErrMalformedReply, v)
		}
		return keyedReply{window: -1, now: v}, nil
	case []any:
		if len(v) != len(keyedRefusalFields) {
			return keyedReply{}, fmt.Errorf("%w: the keyed script answered an array of %d elements; want an integer, or %d integers", ErrMalformedReply, len(v), len(keyedRefusalFields))
		}
		var f [len(keyedRefusalFields)]int64
		for i, e := range v {
			x, ok := e.(int64)
			if !ok {
				return keyedReply{}, fmt.Errorf("%w: the keyed script's %s is a %T; want an integer", ErrMalformedReply, keyedRefusalFields[i], e)
			}
			f[i] = x
		}
		window, retry, now := f[0], f[1], f[2]
		switch {
		case window < 0 || window >= int64(len(windows)):
			return keyedReply{}, fmt.Errorf("%w: the keyed script refused by window %d; want one of 0 to %d", ErrMalformedReply, window, len(windows)-1)
		case retry < 1 || retry > windows[window].maxRetry:
			return keyedReply{}, fmt.Errorf("%w: the keyed script's retry = %d; want between 1 and %d µs for window %d", ErrMalformedReply, retry, windows[window].maxRetry, window)
		}
		return keyedReply{window: int(window), retry: time.Duration(retry) * time.Microsecond, now: now}, nil
	}
	return keyedReply{}, fmt.Errorf("%w: the keyed script answered a %T; want an integer, or an array of %d integers", ErrMalformedReply, v, len(keyedRefusalFields))
}

// decodeRoomsReply checks and decodes the keyed script's answer with
// rooms: the refusal's three integers, window -1 and retry 0 for a grant,
// then each window's room before the call. A room above the window's limit
// (limits[j]) is taken for the limit: no window holds less than nothing.
func decodeRoomsReply(v any, windows []keyWindow, limits []int64) (keyedReply, []int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) != len(keyedRefusalFields)+len(windows) {
		return keyedReply{}, nil, fmt.Errorf("%w: the keyed script answered %T of %d elements; want an array of %d integers", ErrMalformedReply, v, len(a), len(keyedRefusalFields)+len(windows))
	}
	f := make([]int64, len(a))
	for i, e := range a {
		x, ok := e.(int64)
		if !ok {
			return keyedReply{}, nil, fmt.Errorf("%w: the keyed script's element %d is a %T; want an integer", ErrMalformedReply, i, e)
		}
		f[i] = x
	}
	rooms := f[len(keyedRefusalFields):]
	for j := range rooms {
		rooms[j] = min(rooms[j], limits[j])
	}
	if f[0] == -1 {
		if f[1] != 0 || f[2] <= 0 {
			return keyedReply{}, nil, fmt.Errorf("%w: the keyed script granted with retry %d at %dµs; want retry 0 at a positive time", ErrMalformedReply, f[1], f[2])
		}
		return keyedReply{window: -1, now: f[2]}, rooms, nil
	}
	r, err := decodeKeyedReply(a[:len(keyedRefusalFields)], windows)
	return r, rooms, err
}
