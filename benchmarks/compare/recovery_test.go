package compare

import (
	"strings"
	"testing"
)

// On the simulated clock, slidegate's default breaker lets the load back
// as a ramp after the outage, all of it by 10 s, where CountBlocks is still
// shut; the table has a row per second and one for the outage.
func TestRecoverySimulatedIsARamp(t *testing.T) {
	rows, err := RecoverySimulated(DefaultRecovery, 1)
	if err != nil {
		t.Fatal(err)
	}
	ramp, shut := rows[0].After, rows[1].After
	for s := 1; s < len(ramp); s++ {
		if rise := ramp[s] - ramp[s-1]; rise < -0.05 || rise > 1.0/3 {
			t.Errorf("default: %.1f%% at +%ds after %.1f%%: not a ramp", 100*ramp[s], s, 100*ramp[s-1])
		}
	}
	if ramp[0] > 0.1 || ramp[10] != 1 || shut[10] > 0.05 {
		t.Errorf("default %.3f, CountBlocks %.3f: want a ramp from near 0 to 1 by +10 s, CountBlocks still shut", ramp, shut)
	}
	var b strings.Builder
	if err := WriteRecoveryTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(b.String(), "\n"); lines != 2+DefaultRecovery.After+1 {
		t.Errorf("the table has %d lines:\n%s", lines, b.String())
	}
}

// In real time, beside go-zero's breaker fed the same requests at the same
// moments, slidegate's lets through at least as large a share in every
// second from 1 s after the outage, give or take 5 points of noise, more in
// all, and all of it by 10 s. In the first second both let a few percent
// through, as their first probes land: noise, not compared.
func TestRecoveryAtLeastAsFastAsGoZeroInRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: 32 s")
	}
	t.Parallel()
	rows, err := RecoveryInRealTime(DefaultRecovery)
	if err != nil {
		t.Fatal(err)
	}
	goZero, ours := rows[0].After, rows[1].After
	t.Logf("go-zero %.3f", goZero)
	t.Logf("ours    %.3f", ours)
	var sumGoZero, sumOurs float64
	for s := range ours {
		sumGoZero += goZero[s]
		sumOurs += ours[s]
		if s > 0 && ours[s] < goZero[s]-0.05 {
			t.Errorf("+%ds: %.1f%% let through, go-zero %.1f%%", s, 100*ours[s], 100*goZero[s])
		}
	}
	if sumOurs < sumGoZero {
		t.Errorf("%.2f seconds' worth let through in all, go-zero %.2f", sumOurs, sumGoZero)
	}
	if ours[10] < 0.99 {
		t.Errorf("+10s: %.1f%% let through, want all", 100*ours[10])
	}
}
