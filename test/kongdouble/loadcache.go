package kongdouble

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// POST /config is the hot spot of the project's benchmarks: konglet sends
// its whole configuration every time, and consecutive documents mostly
// differ by one route. fastLoad works from the difference between the
// document and the last one it accepted, element by element (a top-level
// element is a service with its routes, an upstream with its targets, ...):
// an element is known by its exact text, and what depends on that text
// alone (decoding, schema validation, ids, defaults, flattened entities,
// their JSON, compiled routes) is done once. The tables that span elements
// (ids, unique keys, references, plugin identities, the routers, the
// sorted ids) are updated for the elements that went or came, and for the
// entities that refer by name or id to an entity that went or came.
//
// The fast path only accepts documents: whatever it cannot prove valid
// goes through schemas.load, which alone writes error answers.
type loadCache struct {
	gen   int                               // marks the elements the load in progress found
	count int                               // elements in elems
	elems map[string]map[string]*cachedElem // collection -> elemKey -> element
	// The tables below and l are those of the elements in elems (empty when
	// the last configuration loaded did not come from fastLoad).
	l          *loaded
	uniques    map[string]map[string]*cachedEntity   // type -> unique value (uniqueKey.key, "\x00"+plugin identity) -> entity
	dependents map[string]map[string][]*cachedEntity // type -> name or id -> entities referring to it by that string
	http       *router
	stream     *router
}

// cachedElem is one top-level element, processed as schemas.load would.
type cachedElem struct {
	key      string // its text, plus its position when an id was derived from it
	gen      int
	entities []*cachedEntity
}

// cachedEntity is one entity of an element (the element or a nested one).
// The entities of a load are the elements' ones, except those that refer to
// others by name or id: they are resolved copies (see resolve).
type cachedEntity struct {
	typ, id  string
	key      string // unique endpoint key, when hasKey
	hasKey   bool
	item     map[string]any // processed item (ids, defaults, parent key), kept when refs
	refs     []strRef       // references by name or id
	flat     map[string]any // flattened, nil until resolved when refs
	enc      encodedEntity
	uniques  []string       // uniqueKey.key of its unique fields, "\x00"+identity for a plugin
	compiled *compiledRoute // for a route
}

// crossCheck, when set (by the package's tests), is given the text of
// every document posted, to compare fastLoad with schemas.load.
var crossCheck func(s *schemas, text []byte)

// fastLoad loads a declarative document (JSON text) through the cache. ok
// is false when the document must go through schemas.load; next is the
// cache to keep once the answer is accepted. c is left as it was, but for
// its generation counter.
func (s *schemas) fastLoad(c *loadCache, text []byte) (l *loaded, next *loadCache, ok bool) {
	top, colls, ok := splitDocument(text)
	if !ok {
		return nil, nil, false
	}
	if _, ok := top["_transform"]; !ok {
		top["_transform"] = true
	}
	if validateRecord(s.top[1], top) != nil {
		return nil, nil, false
	}
	c.gen++
	u := &update{s: s, prev: c, elems: newCow(c.elems), touched: map[strRef]bool{},
		removedIDs: map[string][]string{}, addedIDs: map[string][]string{}, removedRoutes: map[string]*compiledRoute{}}
	prevL := c.l
	if prevL == nil {
		prevL = &loaded{}
	}
	u.entities, u.cached, u.byKey, u.targetsOf = newCow(prevL.entities), newCow(prevL.cached), newCow(prevL.byKey), newCow(prevL.targetsOf)
	u.uniques, u.dependents = newCow(c.uniques), newCow(c.dependents)
	if !u.diff(colls) || !u.apply() {
		return nil, nil, false
	}
	return u.finish()
}

// update is one fastLoad in progress: the next tables, copied from the
// previous ones as they change.
type update struct {
	s              *schemas
	prev           *loadCache
	elems          *cow[*cachedElem]
	count          int
	removed, added []*cachedElem
	entities       *cow[map[string]any]
	cached, byKey  *cow[*cachedEntity]
	targetsOf      *cow[*cachedEntity]
	uniques        *cow[*cachedEntity]
	dependents     *cow[[]*cachedEntity]
	touched        map[strRef]bool // types and keys of entities that went or came
	removedIDs     map[string][]string
	addedIDs       map[string][]string
	removedRoutes  map[string]*compiledRoute
	addedRoutes    []*compiledRoute
}

// diff finds the document's elements among the previous ones, processes
// the new ones and lists those that went.
func (u *update) diff(colls map[string][][]byte) bool {
	gen, kept := u.prev.gen, 0
	for _, coll := range entityOrder {
		old := u.prev.elems[coll]
		for i, raw := range colls[coll] {
			e := old[string(raw)]
			if e == nil {
				e = old[positionalKey(raw, i)]
			}
			switch {
			case e == nil:
				if e = u.s.processElem(coll, raw, i); e == nil || u.elems.m[coll][e.key] != nil {
					return false // invalid, or twice the same: for schemas.load to tell
				}
				u.elems.at(coll)[e.key] = e
				u.added = append(u.added, e)
			case e.gen == gen:
				return false
			default:
				kept++
			}
			e.gen = gen
			u.count++
		}
	}
	if kept < u.prev.count {
		for coll, m := range u.prev.elems {
			for key, e := range m {
				if e.gen != gen {
					delete(u.elems.at(coll), key)
					u.removed = append(u.removed, e)
				}
			}
		}
	}
	return true
}

// positionalKey is the key of an element whose ids depend on its position.
func positionalKey(raw []byte, i int) string {
	return string(raw) + "\x00" + strconv.Itoa(i)
}

// apply updates the tables: what went leaves them first, so that what came
// or changed only collides with what stays.
func (u *update) apply() bool {
	for _, e := range u.removed {
		for _, ce := range e.entities {
			cur := u.cached.m[ce.typ][ce.id]
			u.forget(cur)
			delete(u.cached.at(ce.typ), ce.id)
			delete(u.entities.at(ce.typ), ce.id)
			u.removedIDs[ce.typ] = append(u.removedIDs[ce.typ], ce.id)
			u.touched[strRef{ce.typ, ce.id}] = true
			if ce.hasKey {
				delete(u.byKey.at(ce.typ), ce.key)
				u.touched[strRef{ce.typ, ce.key}] = true
			}
			for _, r := range ce.refs {
				byKey := u.dependents.at(r.typ)
				byKey[r.key] = slices.DeleteFunc(slices.Clone(byKey[r.key]), func(d *cachedEntity) bool { return d == ce })
			}
		}
	}
	var resolving, ready []*cachedEntity
	queued := map[*cachedEntity]bool{}
	for _, e := range u.added {
		for _, ce := range e.entities {
			if u.cached.m[ce.typ][ce.id] != nil || (ce.hasKey && u.byKey.m[ce.typ][ce.key] != nil) {
				return false
			}
			u.cached.at(ce.typ)[ce.id] = ce
			u.addedIDs[ce.typ] = append(u.addedIDs[ce.typ], ce.id)
			u.touched[strRef{ce.typ, ce.id}] = true
			if ce.hasKey {
				u.byKey.at(ce.typ)[ce.key] = ce
				u.touched[strRef{ce.typ, ce.key}] = true
			}
			if ce.refs == nil {
				ready = append(ready, ce)
				continue
			}
			resolving = append(resolving, ce)
			queued[ce] = true
			for _, r := range ce.refs {
				byKey := u.dependents.at(r.typ)
				byKey[r.key] = append(slices.Clip(byKey[r.key]), ce)
			}
		}
	}
	// Entities that stay but refer to one that went or came may now
	// resolve differently, or not at all.
	for t := range u.touched {
		for _, d := range u.dependents.m[t.typ][t.key] {
			if !queued[d] {
				queued[d] = true
				u.forget(u.cached.m[d.typ][d.id])
				resolving = append(resolving, d)
			}
		}
	}
	for _, ce := range resolving {
		r := u.resolve(ce)
		if r == nil {
			return false
		}
		u.cached.at(ce.typ)[ce.id] = r
		ready = append(ready, r)
	}
	for _, ce := range ready {
		for _, k := range ce.uniques {
			if u.uniques.m[ce.typ][k] != nil {
				return false
			}
			u.uniques.at(ce.typ)[k] = ce
		}
		u.entities.at(ce.typ)[ce.id] = ce.flat
		if ce.compiled != nil {
			u.addedRoutes = append(u.addedRoutes, ce.compiled)
		}
		if ce.typ == "targets" {
			u.targetsOf.at(refID(ce.flat["upstream"]))[ce.id] = ce
		}
	}
	return true
}

// forget takes what ce brought to the unique values and the routers out.
func (u *update) forget(ce *cachedEntity) {
	for _, k := range ce.uniques {
		delete(u.uniques.at(ce.typ), k)
	}
	if ce.compiled != nil {
		u.removedRoutes[ce.id] = ce.compiled
	}
	if ce.typ == "targets" {
		delete(u.targetsOf.at(refID(ce.flat["upstream"])), ce.id)
	}
}

// resolve makes the copy of ce (an entity with references by name or id)
// that this load holds; nil when a reference resolves to nothing.
func (u *update) resolve(ce *cachedEntity) *cachedEntity {
	find := func(t, key string) (string, bool) {
		e := u.byKey.m[t][key]
		if e == nil {
			e = u.cached.m[t][key]
		}
		if e == nil {
			return "", false
		}
		return e.id, true
	}
	for _, r := range ce.refs {
		if _, found := find(r.typ, r.key); !found {
			return nil
		}
	}
	r := *ce
	r.fill(u.s, find)
	return &r
}

// fill computes what ce shows and brings to the tables once its references
// resolve through find.
func (ce *cachedEntity) fill(s *schemas, find finder) {
	rec := s.base[ce.typ]
	ce.flat = flattenItem(rec, ce.item, find)
	for _, uk := range uniqueKeys(rec, ce.item, ce.flat) {
		ce.uniques = append(ce.uniques, uk.key)
	}
	if ce.typ == "plugins" {
		ce.uniques = append(ce.uniques, "\x00"+pluginIdentity(ce.item, find))
	}
	ce.enc = encodeEntity(ce.id, ce.flat)
	if ce.typ == "routes" {
		ce.compiled = compileRoute(ce.id, ce.flat, s.flavor)
	}
}

// finish makes the loaded configuration and the next cache.
func (u *update) finish() (*loaded, *loadCache, bool) {
	l := &loaded{entities: u.entities.m, cached: u.cached.m, byKey: u.byKey.m, targetsOf: u.targetsOf.m, ids: map[string][]string{}}
	var prevIDs map[string][]string
	if u.prev.l != nil {
		prevIDs = u.prev.l.ids
	}
	for t, byID := range l.entities {
		switch {
		case len(byID) == 0:
			delete(l.entities, t) // as schemas.load, which lists no empty type
		case u.entities.copied[t]:
			l.ids[t] = mergeIDs(prevIDs[t], u.removedIDs[t], u.addedIDs[t])
		default:
			l.ids[t] = prevIDs[t]
		}
	}
	l.empty = len(l.entities) == 0
	next := &loadCache{gen: u.prev.gen, count: u.count, elems: u.elems.m, l: l,
		uniques: u.uniques.m, dependents: u.dependents.m,
		http:   updateRouter(u.prev.http, u.removedRoutes, u.addedRoutes, l, false),
		stream: updateRouter(u.prev.stream, u.removedRoutes, u.addedRoutes, l, true)}
	return l, next, true
}

// mergeIDs is prev (sorted) without removed, with added.
func mergeIDs(prev, removed, added []string) []string {
	slices.Sort(removed)
	slices.Sort(added)
	out := make([]string, 0, len(prev)-len(removed)+len(added))
	for _, id := range prev {
		if len(removed) > 0 && removed[0] == id {
			removed = removed[1:]
			continue
		}
		for len(added) > 0 && added[0] < id {
			out, added = append(out, added[0]), added[1:]
		}
		out = append(out, id)
	}
	return append(out, added...)
}

// cow is a two-level table of the next load, copied from the previous
// one's level by level on first write: the previous load's tables stay
// intact for their readers and for the next load when this one fails.
type cow[V any] struct {
	m      map[string]map[string]V
	copied map[string]bool
}

func newCow[V any](prev map[string]map[string]V) *cow[V] {
	m := maps.Clone(prev)
	if m == nil {
		m = map[string]map[string]V{}
	}
	return &cow[V]{m: m, copied: map[string]bool{}}
}

// at is the table of t, to write to.
func (c *cow[V]) at(t string) map[string]V {
	if !c.copied[t] {
		c.copied[t] = true
		if c.m[t] = maps.Clone(c.m[t]); c.m[t] == nil {
			c.m[t] = map[string]V{}
		}
	}
	return c.m[t]
}

// processElem runs schemas.load's steps that only depend on one top-level
// element: decoding, pass-1 validation, ids, defaults, registration of the
// element and its children. It returns nil when any of them fails.
func (s *schemas) processElem(coll string, raw []byte, index int) *cachedElem {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	item, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	// Validating an element processes it (defaults) and validates the
	// result: that result, with the ids, is what schemas.load goes on with.
	rec := s.top[1].byName[coll].elements.rec
	processed, errs := processAuto(rec, item)
	if errs != nil || validateRecord(rec, processed) != nil {
		return nil
	}
	e := &cachedElem{key: string(raw)}
	if s.generateItemIDs(coll, item, index, "", nil) {
		e.key = positionalKey(raw, index)
	}
	copyIDs(coll, item, processed)
	st := &refState{byID: map[string]map[string]map[string]any{}, byKey: map[string]map[string]map[string]any{}, errs: ltable{}}
	s.populateReferences(map[string]any{coll: []any{processed}}, "", 0, nil, st)
	if len(st.errs) > 0 {
		return nil
	}
	for _, t := range entityOrder {
		def, rec := entityDefs[t], s.base[t]
		for _, id := range st.ids[t] {
			item := st.byID[t][id]
			ce := &cachedEntity{typ: t, id: id, item: item, refs: stringRefs(rec, item)}
			if def.endpointUnique {
				ce.key, ce.hasKey = item[def.endpointKey].(string)
			}
			if ce.refs == nil {
				ce.fill(s, st.find)
				ce.item = nil // no longer needed: fewer objects for the GC to walk
			}
			e.entities = append(e.entities, ce)
		}
	}
	return e
}

// copyIDs copies the ids generateItemIDs gave to item (an entity of type t)
// and to its nested entities into its processed copy.
func copyIDs(t string, item, processed map[string]any) {
	processed["id"] = item["id"]
	for _, c := range children(t) {
		from, _ := item[c].([]any)
		to, _ := processed[c].([]any)
		for i := range min(len(from), len(to)) {
			f, _ := from[i].(map[string]any)
			p, _ := to[i].(map[string]any)
			if f != nil && p != nil {
				copyIDs(c, f, p)
			}
		}
	}
}

// splitDocument cuts a JSON object into its top-level values, the entity
// collections as the texts of their elements. ok is false for anything
// but a well-formed object of that shape with plain, distinct keys: such
// documents take the slow path. Elements are checked by json.Unmarshal
// when first processed; one that is found in the cache has the exact text
// of an element that was.
func splitDocument(text []byte) (top map[string]any, colls map[string][][]byte, ok bool) {
	p := skipWS(text, 0)
	if p >= len(text) || text[p] != '{' {
		return nil, nil, false
	}
	top, colls = map[string]any{}, map[string][][]byte{}
	seen := map[string]bool{}
	p = skipWS(text, p+1)
	if p < len(text) && text[p] == '}' {
		return top, colls, skipWS(text, p+1) == len(text)
	}
	for {
		if p >= len(text) || text[p] != '"' {
			return nil, nil, false
		}
		end := bytes.IndexByte(text[p+1:], '"')
		if end < 0 {
			return nil, nil, false
		}
		key := string(text[p+1 : p+1+end])
		if seen[key] || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == '\\' || r >= 0x7f }) {
			return nil, nil, false
		}
		seen[key] = true
		p = skipWS(text, p+end+2)
		if p >= len(text) || text[p] != ':' {
			return nil, nil, false
		}
		p = skipWS(text, p+1)
		if slices.Contains(entityOrder, key) {
			var elems [][]byte
			if elems, p, ok = splitArray(text, p); !ok {
				return nil, nil, false
			}
			colls[key] = elems
		} else {
			end, ok := skipValue(text, p)
			if !ok {
				return nil, nil, false
			}
			var v any
			if json.Unmarshal(text[p:end], &v) != nil {
				return nil, nil, false
			}
			top[key], p = v, end
		}
		p = skipWS(text, p)
		if p >= len(text) {
			return nil, nil, false
		}
		switch text[p] {
		case ',':
			p = skipWS(text, p+1)
		case '}':
			return top, colls, skipWS(text, p+1) == len(text)
		default:
			return nil, nil, false
		}
	}
}

// splitArray cuts an array of objects into the objects' texts.
func splitArray(text []byte, p int) ([][]byte, int, bool) {
	if p >= len(text) || text[p] != '[' {
		return nil, p, false
	}
	var elems [][]byte
	p = skipWS(text, p+1)
	if p < len(text) && text[p] == ']' {
		return elems, p + 1, true
	}
	for {
		if p >= len(text) || text[p] != '{' {
			return nil, p, false
		}
		end, ok := skipValue(text, p)
		if !ok {
			return nil, p, false
		}
		elems = append(elems, text[p:end])
		p = skipWS(text, end)
		if p >= len(text) {
			return nil, p, false
		}
		switch text[p] {
		case ',':
			p = skipWS(text, p+1)
		case ']':
			return elems, p + 1, true
		default:
			return nil, p, false
		}
	}
}

func skipWS(text []byte, p int) int {
	for p < len(text) && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r') {
		p++
	}
	return p
}

// skipValue finds the end of the JSON value at p, assuming it is well
// formed (json.Unmarshal checks it later).
func skipValue(text []byte, p int) (int, bool) {
	depth := 0
	for p < len(text) {
		switch c := text[p]; c {
		case '"':
			end, ok := skipString(text, p)
			if !ok {
				return 0, false
			}
			p = end
			if depth == 0 {
				return p, true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return p, true // the end of a scalar
			}
			depth--
			if depth == 0 {
				return p + 1, true
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return p, true
			}
		}
		p++
	}
	return p, depth == 0
}

// skipString returns the position after the string starting at p.
func skipString(text []byte, p int) (int, bool) {
	p++
	for {
		i := bytes.IndexByte(text[p:], '"')
		if i < 0 {
			return 0, false
		}
		q := p + i
		backslashes := 0
		for k := q - 1; k >= p && text[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1, true
		}
		p = q + 1
	}
}

// tsHole stands for a timestamp in encodeEntity's output.
const tsHole = "\x00kongdouble:timestamp\x00"

var tsHoleJSON, _ = json.Marshal(tsHole)

// encodedEntity is an entity's member of the answer, "id":{...}, in one
// piece (the answer is written from thousands of them), with the offsets
// where its timestamps go.
type encodedEntity struct {
	b     []byte
	holes [2]int
	n     int // holes used; 0 when the entity could not be encoded so
}

// encodeEntity encodes the member "id": entity of the answer as json.Marshal
// would once the entity is stamped (created_at unless set, then updated_at).
func encodeEntity(id string, flat map[string]any) encodedEntity {
	c := maps.Clone(flat)
	holes := 1
	if c["created_at"] == nil {
		c["created_at"] = tsHole
		holes++
	}
	c["updated_at"] = tsHole
	b, err := json.Marshal(c)
	if err != nil || bytes.Count(b, tsHoleJSON) != holes {
		return encodedEntity{} // a value that cannot be split: encoded when answering
	}
	key, _ := json.Marshal(id)
	e := encodedEntity{b: make([]byte, 0, len(key)+1+len(b)-holes*len(tsHoleJSON))}
	e.b = append(append(e.b, key...), ':')
	for part := range bytes.SplitSeq(b, tsHoleJSON) {
		if e.b = append(e.b, part...); e.n < holes {
			e.holes[e.n], e.n = len(e.b), e.n+1
		}
	}
	return e
}

// appendEntities appends the 201 answer of POST /config: the flattened
// entities (stamped) with the default workspace, as writeJSON would.
func appendEntities(buf []byte, l *loaded) []byte {
	ws, _ := json.Marshal(map[string]any{defaultWorkspaceID: map[string]any{
		"id": defaultWorkspaceID, "name": "default", "comment": nil,
		"config": map[string]any{}, "meta": map[string]any{},
	}})
	types := slices.Sorted(maps.Keys(l.entities))
	types = append(types, "workspaces")
	sort.Strings(types)
	ts, _ := json.Marshal(l.ts)
	tsMs, _ := json.Marshal(l.tsMs)
	buf = append(buf, '{')
	for i, t := range types {
		if i > 0 {
			buf = append(buf, ',')
		}
		key, _ := json.Marshal(t)
		buf = append(append(buf, key...), ':')
		if t == "workspaces" {
			buf = append(buf, ws...)
			continue
		}
		stamp := ts
		if t == "targets" {
			stamp = tsMs
		}
		buf = append(buf, '{')
		for j, id := range l.sortedIDs(t) {
			if j > 0 {
				buf = append(buf, ',')
			}
			var e encodedEntity
			if ce := l.cached[t][id]; ce != nil {
				e = ce.enc
			} else {
				e = encodeEntity(id, l.entities[t][id])
			}
			if e.n == 0 {
				key, _ := json.Marshal(id)
				b, _ := json.Marshal(l.stamped(t, l.entities[t][id]))
				buf = append(append(append(buf, key...), ':'), b...)
				continue
			}
			done := 0
			for _, h := range e.holes[:e.n] {
				buf = append(append(buf, e.b[done:h]...), stamp...)
				done = h
			}
			buf = append(buf, e.b[done:]...)
		}
		buf = append(buf, '}')
	}
	return append(buf, "}\n"...)
}
