package rulefile

import (
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
)

func ptr[T any](v T) *T { return &v }

// everyField is a sound set of rules in which every field of every kind of
// rule, and every setting of the set, has a value other than its zero.
func everyField(t *testing.T) slidegate.Rules {
	t.Helper()
	d := func(s string) slidegate.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return slidegate.Duration(v)
	}
	r := slidegate.Rules{
		Flow: []slidegate.FlowRule{
			{Resource: "a", Type: slidegate.QPSRule, Limit: 100, Interval: d("2s"), Buckets: 20, WarmUp: d("10s"), ColdFactor: 4},
			{Resource: "b", Limit: 10, RefResource: "a", Shadow: true},
			{Resource: "h", Limit: 10, Borrow: d("50ms")},
			{Resource: "c", Type: slidegate.ThrottleRule, Limit: 10, MaxWait: d("200ms")},
			{Resource: "d", Limit: 5, Cluster: true, Lease: 3},
			{Resource: "e", Limit: 5, PerKey: true, Overrides: map[string]int64{"tenant-a": 50, "abuser": 0}},
			{Resource: "f", Type: slidegate.ShedRule, CPUThreshold: 0.8},
			{Resource: "g", Type: slidegate.AdaptiveRule, Limit: 20, Algorithm: "aimd", MinLimit: 2, MaxLimit: 200, Tolerance: 1.5, Share: "key"},
		},
		Breakers: []slidegate.BreakerRule{
			{Resource: "a", Strategy: slidegate.SlowRatioBreaker, Threshold: 0.5, MaxRT: d("300ms"), MinRequests: ptr[int64](20),
				Interval: d("10s"), Buckets: 10, OpenTimeout: d("5s"), MaxOpenTimeout: d("1m"), Probes: 3, ProbeTimeout: d("2s"), Shadow: true},
			{Resource: "b", Strategy: slidegate.ErrorCountBreaker, Count: 5},
			{Resource: "c", Strategy: slidegate.SREBreaker, K: 1.5, Protection: ptr[int64](5), BlockPolicy: "count_blocks"},
		},
		Shadow: true,
	}
	// A field added to the rules after this test was written, and so left
	// out above, gets a value of its own kind, so that its round trip is
	// checked too; if that value is not sound, give the field one above.
	fillUnset(reflect.ValueOf(&r).Elem())
	if err := r.Validate(); err != nil {
		t.Fatalf("the rules with every field are not sound; give the fields sound values: %v", err)
	}
	return r
}

// fillUnset gives every field of v (a struct) that is zero, and every
// field of the rules in its lists that is zero in all of them, a value.
func fillUnset(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			if f.IsZero() {
				f.Set(someValue(f.Type(), v.Type().Field(i).Name))
			}
			continue
		}
		for j := range f.Type().Elem().NumField() {
			set := false
			for k := range f.Len() {
				set = set || !f.Index(k).Field(j).IsZero()
			}
			for k := range f.Len() {
				if !set {
					f.Index(k).Field(j).Set(someValue(f.Index(k).Field(j).Type(), v.Type().Field(i).Name+strconv.Itoa(k)))
				}
			}
		}
	}
}

// someValue returns a value of type t other than its zero; a string is
// made of id, which tells the rules of a list apart.
func someValue(t reflect.Type, id string) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("x" + id)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t == reflect.TypeFor[slidegate.Duration]() {
			v.SetInt(int64(time.Second))
		} else {
			v.SetInt(1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(someValue(t.Elem(), id))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(someValue(t.Key(), id), someValue(t.Elem(), id))
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), someValue(t.Elem(), id)))
	}
	return v
}

// unsetFields names the fields of r, and of the rules in its lists, that
// are zero everywhere.
func unsetFields(r slidegate.Rules) []string {
	var unset []string
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			if f.IsZero() {
				unset = append(unset, v.Type().Field(i).Name)
			}
			continue
		}
		for j := range f.Type().Elem().NumField() {
			set := false
			for k := range f.Len() {
				set = set || !f.Index(k).Field(j).IsZero()
			}
			if !set {
				unset = append(unset, v.Type().Field(i).Name+"."+f.Type().Elem().Field(j).Name)
			}
		}
	}
	return unset
}

// The last good file gives back every field of every rule as it was put
// in force, whatever the file's name.
func TestLastGoodRoundTripsEveryRuleField(t *testing.T) {
	r := everyField(t)
	if unset := unsetFields(r); len(unset) > 0 {
		t.Fatalf("the rules leave %v unset", unset)
	}
	for _, name := range []string{"last.json", "last-good", "last.yaml"} {
		path := filepath.Join(t.TempDir(), name)
		if err := writeLastGood(path, r); err != nil {
			t.Fatal(err)
		}
		got, err := parse(path, mustRead(t, path), true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: read back\n%+v\nwant\n%+v", name, got, r)
		}
		if err := writeLastGood(path, limitRules(1)); err != nil { // over the one before
			t.Fatal(err)
		}
		if got, err := parse(path, mustRead(t, path), true); err != nil || !reflect.DeepEqual(got, limitRules(1)) {
			t.Fatalf("%s rewritten: read back %+v, %v; want %+v", name, got, err, limitRules(1))
		}
	}
}
