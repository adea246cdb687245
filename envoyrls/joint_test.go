package envoyrls

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
)

// racedJoint is a joint backend over windows in the process whose set
// count finds, as if another request had taken it since the check, no
// room in the window of key b: it refuses, counting nothing.
type racedJoint struct {
	*local
}

func (j racedJoint) allowAll(now int64, asks []ask) (int, flow.Decision) {
	for i, a := range asks {
		if a.key == descriptorKey("d", desc("b", "x").Entries, nil) {
			return i, flow.Decision{Reason: flow.RateLimited, RetryAfter: time.Second}
		}
	}
	for _, a := range asks {
		a.w.allow(now, a.key, a.n)
	}
	return -1, allowedDecision
}

// A request whose count a joint backend refuses, another request having
// taken the room since the check, is refused with none of its descriptors
// counted, and the refusing one OVER_LIMIT.
func TestARequestRefusedWhenCountedJointlyIsCountedInNoWindow(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	r.svc.windows = racedJoint{newLocal(r.svc.mem, r.clock)}
	r.svc.shapes.m = map[shape]*shapeWindow{} // windows of the joint backend
	cfg, err := parseFiles(map[string]string{"d.yaml": hitsConfig})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	resp := r.ask(t, request("d", desc("a", "x"), desc("b", "x")))
	if code, cs := codesOf(resp); code != over || cs[0] != ok || cs[1] != over {
		t.Fatalf("%v %v; want OVER_LIMIT [OK OVER_LIMIT]", code, cs)
	}
	if got := resp.Statuses[0].LimitRemaining; got != 10 {
		t.Errorf("a's remaining = %d; want 10: not counted", got)
	}
	resp = r.ask(t, request("d", desc("a", "x")))
	if got := resp.Statuses[0].LimitRemaining; got != 9 {
		t.Errorf("a's remaining after one more = %d; want 9: the refused request counted nowhere", got)
	}
}
