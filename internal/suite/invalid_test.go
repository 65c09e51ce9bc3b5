package suite

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
)

// noInvalidArgument lists the public methods that take nothing a caller
// could get wrong, so they need no row in invalidCalls.
var noInvalidArgument = map[string]string{
	"Lock.Token":        "takes nothing",
	"Lock.Fence":        "takes nothing",
	"Lock.Lost":         "takes nothing",
	"Lock.Context":      "takes only a parent context (nil is taken as Background)",
	"Lock.Owner":        "takes nothing",
	"Lock.Key":          "returns no error: any name makes a valid key, after the lock's tag",
	"Election.Observe":  "returns no error: with a nil ctx or a bad name its channel is closed at once",
	"MultiLock.Lost":    "takes nothing",
	"MultiLock.Locks":   "takes nothing",
	"MultiLock.Context": "takes only a parent context (nil is taken as Background)",
	"Permit.Lost":       "takes nothing",
	"Permit.Context":    "takes only a parent context (nil is taken as Background)",
	"Permit.Token":      "takes nothing",
	"Permit.Fence":      "takes nothing",
	"Permit.Owner":      "takes nothing",
	"Permit.Weight":     "takes nothing",
}

// invalidCases are the rows a method's signature calls for: its first
// string is an object name (every bad name); an int is a count (0, -1);
// an int64 an activity id; a time.Duration a lease; an options struct
// brings its duration and int fields. Other strings (items, prefixes,
// periods) and variadic lists have no rule here: their rows are written
// by hand.
func invalidCases(m reflect.Method) []string {
	var cases []string
	durations := func(prefix string) { cases = append(cases, prefix+" negative", prefix+" sub-ms") }
	counts := func(prefix string) { cases = append(cases, prefix+" 0", prefix+" -1") }
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	durType := reflect.TypeOf(time.Duration(0))
	named := false
	for i := 1; i < m.Type.NumIn(); i++ { // 0 is the receiver
		in := m.Type.In(i)
		if m.Type.IsVariadic() && i == m.Type.NumIn()-1 {
			continue
		}
		switch {
		case in == ctxType:
			cases = append(cases, "nil ctx")
		case in.Kind() == reflect.String && m.Name == "SetOwner":
			cases = append(cases, "owner too long")
		case in == reflect.TypeOf([]string(nil)):
			cases = append(cases, "no names", "a name twice", "too many names", "a bad name")
		case in == reflect.TypeOf((*atomicredis.GuardedScript)(nil)):
			cases = append(cases, "nil script", "key without the tag")
		case in.Kind() == reflect.String && m.Name == "Campaign":
			cases = append(cases, "value too long")
		case in.Kind() == reflect.String && !named:
			named = true
			for _, n := range badNames {
				cases = append(cases, fmt.Sprintf("name %q", n))
			}
		case in.Kind() == reflect.String:
		case in == durType:
			durations("duration")
		case in.Kind() == reflect.Int:
			counts("limit")
		case in.Kind() == reflect.Int64:
			cases = append(cases, "id -1", "id -2^63")
		case in.Kind() == reflect.Struct:
			for j := 0; j < in.NumField(); j++ {
				f := in.Field(j)
				switch {
				case f.Name == "Wait" && strings.HasPrefix(m.Name, "Try"): // not used
				case m.Name == "Election" && f.Name != "TTL": // Campaign sets them
				case f.Name == "Owner":
					cases = append(cases, "Owner too long")
				case f.Name == "Weight": // 0 means 1
					cases = append(cases, "Weight -1", "Weight 2^53")
				case f.Type == durType:
					durations(f.Name)
				case f.Type.Kind() == reflect.Int:
					counts(f.Name)
				}
			}
		default:
			cases = append(cases, "<no rule for an argument of type "+in.String()+">")
		}
	}
	return cases
}

// Every exported method of *Engine, *Lock and *Permit either has a row in
// invalidCalls for each invalid value its arguments can take, or is listed
// in noInvalidArgument (and then takes nothing but ctx); and every row
// names a method that exists.
func TestInvalidCallsCoverTheAPI(t *testing.T) {
	rows := map[string]bool{}
	for _, c := range invalidCalls(nil, nil, nil) {
		if rows[c.name] {
			t.Errorf("row %q twice", c.name)
		}
		rows[c.name] = true
	}
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	methods := map[string]bool{}
	for _, typ := range []struct {
		prefix string
		t      reflect.Type
	}{
		{"", reflect.TypeOf(&atomicredis.Engine{})},
		{"Lock.", reflect.TypeOf((*atomicredis.Lock)(nil))},
		{"Permit.", reflect.TypeOf((*atomicredis.Permit)(nil))},
		{"Election.", reflect.TypeOf((*atomicredis.Election)(nil))},
		{"MultiLock.", reflect.TypeOf((*atomicredis.MultiLock)(nil))},
	} {
		for i := 0; i < typ.t.NumMethod(); i++ {
			m := typ.t.Method(i)
			name := typ.prefix + m.Name
			methods[name] = true
			if why, ok := noInvalidArgument[name]; ok {
				for j := 1; j < m.Type.NumIn(); j++ {
					if m.Type.In(j) != ctxType && name != "Lock.Key" {
						t.Errorf("%s is exempt (%s) but takes a %s", name, why, m.Type.In(j))
					}
				}
				continue
			}
			cases := invalidCases(m)
			if len(cases) == 0 {
				t.Errorf("%s: no invalid argument known: write its rows in invalidCalls or exempt it in noInvalidArgument with the reason", name)
			}
			for _, c := range cases {
				if !rows[name+": "+c] {
					t.Errorf("invalidCalls has no row %q", name+": "+c)
				}
			}
		}
	}
	for row := range rows {
		method, _, ok := strings.Cut(row, ": ")
		if !ok || !methods[method] {
			t.Errorf("row %q does not name a method (want \"Method: case\")", row)
		}
	}
}
