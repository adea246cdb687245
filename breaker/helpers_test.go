package breaker

// Test spellings of the options that WithFormula folds: K alone keeps the
// default protection, and protection alone the default K.
func withK(k float64) Option { return WithFormula(k, 5) }

func withProtection(n int64) Option { return WithFormula(0, n) }

// current returns the breaker's state now.
func (a *SRE) current() State { return a.Stats().State }

// current returns the circuit's state, reading no clock.
func (c *Circuit) current() State { return State(c.state.Load() & 3) }

// closeListener stops telling the OnStateChange listener, if any.
func (c *Circuit) closeListener() {
	if c.notify != nil {
		c.notify.Close()
	}
}

// excluding is WithOutcomeOf's classifier that takes the errors f picks as
// ignored, nil as a success, and any other error as a failure.
func excluding(f func(error) bool) func(error) Outcome {
	return func(err error) Outcome {
		switch {
		case f(err):
			return Ignored
		case err == nil:
			return Success
		}
		return Failure
	}
}

// policyNames names the block policies, for subtests and messages.
var policyNames = map[BlockPolicy]string{
	CountBlocksWhileFailing: "count blocks while failing",
	CountBlocks:             "count blocks",
	IgnoreBlocks:            "ignore blocks",
}
