package kongdouble

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
)

// During the tests, every document posted (in any body form) is loaded by
// fastLoad, with a cache of its own per schema set that follows the
// documents fastLoad accepts, and by schemas.load: whatever fastLoad
// accepts, schemas.load must accept with the same entities and answer.
func init() { crossCheck = checkFastLoad }

var checkCaches = struct {
	sync.Mutex
	m map[*schemas]*loadCache
}{m: map[*schemas]*loadCache{}}

func checkFastLoad(s *schemas, text []byte) {
	checkCaches.Lock()
	defer checkCaches.Unlock()
	c := checkCaches.m[s]
	if c == nil {
		c = &loadCache{}
	}
	l, next, ok := s.fastLoad(c, text)
	if !ok {
		return
	}
	l.ts, l.tsMs = 1700000000, 1700000000.123
	checkCaches.m[s] = next
	input, msg := unserialize(text)
	if input == nil {
		panic("kongdouble: fastLoad accepted a document that does not parse: " + msg)
	}
	want, errs := s.load(input, nil)
	if errs != nil {
		panic("kongdouble: fastLoad accepted an invalid document: " + luaPretty(errs))
	}
	if want.empty != l.empty || !reflect.DeepEqual(want.entities, l.entities) {
		panic(fmt.Sprintf("kongdouble: fastLoad loaded\n%v\nwhere schemas.load loaded\n%v", l.entities, want.entities))
	}
	want.ts, want.tsMs = l.ts, l.tsMs
	if !reflect.DeepEqual(l.ids, want.sortedIDsOfAll()) {
		panic("kongdouble: fastLoad sorted ids differently")
	}
	for _, rt := range []struct {
		got    *router
		stream bool
	}{{next.http, false}, {next.stream, true}} {
		if got, want := routerOrder(rt.got), routerOrder(buildRouter(want, s.flavor, rt.stream)); !reflect.DeepEqual(got, want) {
			panic(fmt.Sprintf("kongdouble: fastLoad's router (stream %v) is\n%.3000v\nwhere buildRouter's is\n%.3000v", rt.stream, got, want))
		}
	}
	answer := map[string]any{"workspaces": map[string]any{defaultWorkspaceID: map[string]any{
		"id": defaultWorkspaceID, "name": "default", "comment": nil,
		"config": map[string]any{}, "meta": map[string]any{},
	}}}
	for t, byID := range want.entities {
		m := map[string]any{}
		for id, e := range byID {
			m[id] = want.stamped(t, e)
		}
		answer[t] = m
	}
	var wantBody bytes.Buffer
	_ = json.NewEncoder(&wantBody).Encode(answer)
	if gotBody := appendEntities(nil, l); !bytes.Equal(wantBody.Bytes(), gotBody) {
		panic(fmt.Sprintf("kongdouble: fastLoad answers\n%.3000s\nwhere encoding/json answers\n%.3000s", gotBody, wantBody.Bytes()))
	}
	fastChecked++
}

// routerOrder is what a router tries, in order, and the fields it reads.
func routerOrder(rt *router) []any {
	out := []any{rt.fields}
	for _, m := range rt.matchers {
		out = append(out, m.priority, m.id, m.routeID, m.route)
	}
	return out
}

// fastChecked counts the documents checkFastLoad compared.
var fastChecked int

// WithoutCrossCheck turns the check off (for benchmarks) until the
// returned function is called.
func WithoutCrossCheck() (restore func()) {
	saved := crossCheck
	crossCheck = nil
	return func() { crossCheck = saved }
}

// FastChecked is how many documents the cross-check compared so far.
func FastChecked() int {
	checkCaches.Lock()
	defer checkCaches.Unlock()
	return fastChecked
}
