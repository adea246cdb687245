package latbin

import "testing"

func TestEveryBinStartsAtItsLowAndEndsBeforeTheNext(t *testing.T) {
	for i := 1; i < Bins; i++ {
		if got := Of(Low(i)); got != i {
			t.Fatalf("Of(Low(%d) = %d) = %d", i, Low(i), got)
		}
		if got := Of(Low(i) - 1); got != i-1 {
			t.Fatalf("Of(Low(%d) - 1 = %d) = %d, want %d", i, Low(i)-1, got, i-1)
		}
	}
	if got := Of(Range - 1); got != Bins-1 {
		t.Errorf("Of(Range - 1) = %d, want the last bin %d", got, Bins-1)
	}
}

func TestValueIsWithinItsBin(t *testing.T) {
	for i := range Bins {
		if v := Value(i); v < Low(i) || v >= Low(i+1) {
			t.Errorf("Value(%d) = %d, outside [%d, %d)", i, v, Low(i), Low(i+1))
		}
	}
}
