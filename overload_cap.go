package slidegate

import "github.com/slidegate/slidegate/internal/flowlimits"

// shedCap is the most requests in flight a shed rule admits, as
// flow.Shedder decides: its bound while it sheds (the CPU at or above the
// threshold, or in the cool-off); no cap while the CPU is below half the
// threshold; twice the bound in between, and always without a CPU signal
// (a threshold of -1). st is the rule's status (Limit the bound, -1 until
// learnt; CPU the usage read); threshold its FlowRule.CPUThreshold.
func shedCap(st OverloadStatus, threshold float64) int64 {
	if threshold == 0 {
		threshold = flowlimits.DefaultShedCPUThreshold
	}
	switch {
	case st.Limit < 0:
		return -1
	case st.Shedding:
		return st.Limit
	case threshold > 0 && st.CPU < threshold/2:
		return -1
	}
	return 2 * st.Limit
}
