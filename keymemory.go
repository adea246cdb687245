package slidegate

import "github.com/slidegate/slidegate/internal/flowstate"

// WithKeyMemory bounds the heap that all the guard's per-key rules hold
// together, whatever their number and resources. The default is
// 64 MiB. The bound covers the sketches and hot
// keys of per-key QPS rules, and the sketches of per-key concurrency and
// throttle rules. A rule past the bound stops growing: it never lets a key
// over its limit, and refuses some keys early ([flow.KeyedQPS] says
// which). Each rule keeps a small floor besides. bytes must be at least 0.
func WithKeyMemory(bytes int64) Option {
	return func(o *guardOptions) {
		if bytes < 0 {
			o.bad("key memory = %d: must be at least 0 bytes", bytes)
			return
		}
		o.keyMemory = bytes
	}
}

// KeyMemory returns the bytes the guard's per-key rules hold now, and the
// bound WithKeyMemory set. A rule the guard no longer uses gives its bytes
// back once the garbage collector has found it so.
func (g *Guard) KeyMemory() (inUse, limit int64) {
	return flowstate.KeyMemory(g.keys)
}
