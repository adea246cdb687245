// Package flowhook lets the modules of this repository reach what package
// flow does not export to its users. Package flow sets each hook when it is
// initialized, before any importer runs.
package flowhook

// KeyedLeftAt is set by package flow: a
//
//	func(q *flow.KeyedQPS, now int64, key string) int64
//
// that returns how many more requests key may have at time now before one
// of q's windows refuses it: the least, over the windows, of the key's
// limit less what the window counts of it. It counts nothing. What it
// says holds until the next decision for the key, or until time moves.
// It cannot be typed here, for package flow imports this one.
var KeyedLeftAt any

// KeyMemoryInUse is set by package flow: a
//
//	func(m *flow.KeyMemory) int64
//
// that returns the bytes the limiters drawing from m hold now.
var KeyMemoryInUse any
