package kongdouble

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
)

// POST /config is the hot spot of the project's benchmarks: konglet sends
// its whole configuration every time, and consecutive documents mostly
// differ by one route. loadCache memoizes, per top-level element of the
// document (a service with its routes, an upstream with its targets, ...)
// and keyed by the element's exact text, everything that depends on that
// text alone: decoding, schema validation, ids, defaults, the flattened
// entities and their JSON. What depends on other entities (uniqueness,
// references, plugin identity) is checked again on every load.
//
// The fast path only accepts documents: whatever it cannot prove valid
// goes through schemas.load, which alone writes error answers. It holds
// the entries of the last accepted document only.
type loadCache struct {
	elems map[string]map[string]*cachedElem // collection -> element text -> element
	exprs map[string]exprNode               // router expression -> parsed
	prev  *loaded
}

// cachedElem is one top-level element, processed as schemas.load would.
type cachedElem struct {
	index      int  // its position when processed
	positional bool // some id was derived from that position
	entities   []*cachedEntity
	refs       []expectedRef // foreign references to resolve
}

// cachedEntity is one entity of an element (the element or a nested one).
type cachedEntity struct {
	typ, id string
	key     string // unique endpoint key, when hasKey
	hasKey  bool
	item    map[string]any // processed item (ids, defaults, parent key)
	flat    map[string]any // flattened, nil when it needs other entities
	enc     [][]byte       // flat as JSON, split where timestamps go
	uniques []uniqueKey
	// compiled is the route's part of the router, once buildRouter made it.
	compiled *compiledRoute
}

// crossCheck, when set (by the package's tests), is given the text of
// every document posted, to compare fastLoad with schemas.load.
var crossCheck func(s *schemas, text []byte)

// fastLoad loads a declarative document (JSON text) through the cache. ok
// is false when the document must go through schemas.load; next is the
// cache to keep once the answer is accepted.
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
	next = &loadCache{elems: map[string]map[string]*cachedElem{}}
	var elems []*cachedElem
	counts := map[string]int{}
	for _, coll := range entityOrder {
		raws := colls[coll]
		if len(raws) == 0 {
			continue
		}
		old := c.elems[coll]
		cur := make(map[string]*cachedElem, len(raws))
		next.elems[coll] = cur
		for i, raw := range raws {
			e := old[string(raw)]
			if e == nil || (e.positional && e.index != i) {
				if e = s.processElem(coll, raw, i); e == nil {
					return nil, nil, false
				}
			}
			cur[string(raw)] = e
			elems = append(elems, e)
			for _, ce := range e.entities {
				counts[ce.typ]++
			}
		}
	}

	st := &refState{byID: map[string]map[string]map[string]any{}, byKey: map[string]map[string]map[string]any{}}
	for t, n := range counts {
		st.byID[t] = make(map[string]map[string]any, n)
		if entityDefs[t].endpointUnique {
			st.byKey[t] = make(map[string]map[string]any, n)
		}
	}
	for _, e := range elems {
		for _, ce := range e.entities {
			if ce.hasKey {
				if st.byKey[ce.typ][ce.key] != nil {
					return nil, nil, false
				}
				st.byKey[ce.typ][ce.key] = ce.item
			}
			if st.byID[ce.typ][ce.id] != nil {
				return nil, nil, false
			}
			st.byID[ce.typ][ce.id] = ce.item
		}
	}
	for _, e := range elems {
		for _, r := range e.refs {
			key, _ := r.value.(string)
			if m, isMap := r.value.(map[string]any); isMap {
				key, _ = m["id"].(string)
			}
			if findEntity(st.byKey, st.byID, r.ref, key) == nil {
				return nil, nil, false
			}
		}
	}

	l = &loaded{entities: map[string]map[string]map[string]any{}, encoded: map[string]map[string][][]byte{},
		cachedRoutes: make(map[string]*cachedEntity, counts["routes"]), empty: len(counts) == 0}
	for t, n := range counts {
		l.entities[t] = make(map[string]map[string]any, n)
		l.encoded[t] = make(map[string][][]byte, n)
	}
	uniques := map[string]bool{}
	pluginKeys := map[string]bool{}
	for _, e := range elems {
		for _, ce := range e.entities {
			flat, us := ce.flat, ce.uniques
			if flat == nil {
				rec := s.base[ce.typ]
				flat = flattenItem(rec, ce.item, st)
				us = uniqueKeys(rec, ce.item, flat)
			} else {
				l.encoded[ce.typ][ce.id] = ce.enc
				if ce.typ == "routes" {
					l.cachedRoutes[ce.id] = ce
				}
			}
			for _, u := range us {
				k := ce.typ + "\x00" + u.key
				if uniques[k] {
					return nil, nil, false
				}
				uniques[k] = true
			}
			if ce.typ == "plugins" {
				k := pluginIdentity(ce.item, st)
				if pluginKeys[k] {
					return nil, nil, false
				}
				pluginKeys[k] = true
			}
			l.entities[ce.typ][ce.id] = flat
		}
	}
	next.exprs, next.prev = c.exprs, l
	return l, next, true
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
	elemField := s.top[1].byName[coll].elements
	el := *elemField
	el.required = true
	if validateField(&el, item) != nil {
		return nil
	}
	e := &cachedElem{index: index, positional: s.generateItemIDs(coll, item, index, "", nil)}
	processed, _ := adjustField(elemField, item, true)
	st := &refState{byID: map[string]map[string]map[string]any{}, byKey: map[string]map[string]map[string]any{}, errs: ltable{}}
	s.populateReferences(map[string]any{coll: []any{processed}}, "", 0, nil, st)
	if len(st.errs) > 0 {
		return nil
	}
	e.refs = st.expected
	for _, t := range entityOrder {
		def, rec := entityDefs[t], s.base[t]
		for _, id := range st.ids[t] {
			item := st.byID[t][id]
			ce := &cachedEntity{typ: t, id: id, item: item}
			if def.endpointUnique {
				ce.key, ce.hasKey = item[def.endpointKey].(string)
			}
			if !hasStringRef(rec, item) {
				ce.flat = flattenItem(rec, item, nil)
				ce.uniques = uniqueKeys(rec, item, ce.flat)
				ce.enc = encodeEntity(ce.flat)
			}
			e.entities = append(e.entities, ce)
		}
	}
	return e
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

// encodeEntity encodes a flattened entity as json.Marshal would once
// stamped, split where its timestamps go (created_at unless set, then
// updated_at).
func encodeEntity(flat map[string]any) [][]byte {
	c := maps.Clone(flat)
	holes := 1
	if c["created_at"] == nil {
		c["created_at"] = tsHole
		holes++
	}
	c["updated_at"] = tsHole
	b, err := json.Marshal(c)
	if err != nil || bytes.Count(b, tsHoleJSON) != holes {
		return nil // a value that cannot be split: encoded when answering
	}
	return bytes.Split(b, tsHoleJSON)
}

// writeEntities writes the 201 answer of POST /config: the flattened
// entities (stamped) with the default workspace, as writeJSON would.
func writeEntities(buf *bufio.Writer, l *loaded) {
	ws, _ := json.Marshal(map[string]any{defaultWorkspaceID: map[string]any{
		"id": defaultWorkspaceID, "name": "default", "comment": nil,
		"config": map[string]any{}, "meta": map[string]any{},
	}})
	types := slices.Sorted(maps.Keys(l.entities))
	types = append(types, "workspaces")
	sort.Strings(types)
	ts, _ := json.Marshal(l.ts)
	tsMs, _ := json.Marshal(l.tsMs)
	buf.WriteByte('{')
	for i, t := range types {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(buf, t)
		buf.WriteByte(':')
		if t == "workspaces" {
			buf.Write(ws)
			continue
		}
		stamp := ts
		if t == "targets" {
			stamp = tsMs
		}
		buf.WriteByte('{')
		for j, id := range l.sortedIDs(t) {
			if j > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, id)
			buf.WriteByte(':')
			parts := l.encoded[t][id]
			if parts == nil {
				parts = encodeEntity(l.entities[t][id])
			}
			if parts == nil {
				b, _ := json.Marshal(l.stamped(t, l.entities[t][id]))
				buf.Write(b)
				continue
			}
			for n, part := range parts {
				if n > 0 {
					buf.Write(stamp)
				}
				buf.Write(part)
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteString("}\n")
}

// writeJSONString writes s as json.Marshal would, quickly for the ids and
// names that need no escaping.
func writeJSONString(buf *bufio.Writer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			buf.Write(b)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}

// index sorts the ids of every entity type, from the order of prev (the
// previous load) when there is one: most ids are in both.
func (l *loaded) index(prev *loaded) {
	l.ids = map[string][]string{}
	for t, byID := range l.entities {
		var kept, added []string
		if prev != nil && prev.ids != nil {
			kept = make([]string, 0, len(byID))
			for _, id := range prev.ids[t] {
				if byID[id] != nil {
					kept = append(kept, id)
				}
			}
			if len(kept) < len(byID) {
				for id := range byID {
					if prev.entities[t][id] == nil {
						added = append(added, id)
					}
				}
			}
		} else {
			added = slices.Collect(maps.Keys(byID))
		}
		slices.Sort(added)
		ids := make([]string, 0, len(byID))
		for len(kept) > 0 || len(added) > 0 {
			if len(added) == 0 || (len(kept) > 0 && kept[0] < added[0]) {
				ids, kept = append(ids, kept[0]), kept[1:]
			} else {
				ids, added = append(ids, added[0]), added[1:]
			}
		}
		l.ids[t] = ids
	}
}
