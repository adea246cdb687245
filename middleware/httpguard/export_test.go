package httpguard

// Unexported bounds and defaults the tests check.
const (
	MaxDrain          = maxDrain
	DefaultMaxRetries = 2
	OtherMethod       = "_OTHER"
	UnknownRoute      = "(unknown route)"
)
