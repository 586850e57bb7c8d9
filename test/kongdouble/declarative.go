package kongdouble

import (
	"encoding/json"
	"fmt"
	"sort"
)

// This file ports the flow of kong/db/schema/others/declarative_config.lua:
// two validation passes, deterministic ids, uniqueness and foreign
// references, then the flat entity map that POST /config answers with.

type variantKey struct {
	entity string
	nested bool
	pass   int
}

// schemas holds the entity schemas for one router flavor and plugin set.
type schemas struct {
	flavor   string
	base     map[string]*record
	variants map[variantKey]*record
	top      map[int]*record
}

func newSchemas(flavor string, enabledPlugins []string) *schemas {
	s := &schemas{
		flavor: flavor,
		base: map[string]*record{
			"consumers":       consumersRecord(),
			"certificates":    certificatesRecord(),
			"ca_certificates": caCertificatesRecord(),
			"services":        servicesRecord(),
			"routes":          routesRecord(flavor),
			"snis":            snisRecord(),
			"upstreams":       upstreamsRecord(),
			"targets":         targetsRecord(),
			"plugins":         pluginsRecord(enabledPlugins),
		},
		variants: map[variantKey]*record{},
		top:      map[int]*record{},
	}
	for _, pass := range []int{1, 2} {
		top := newRecord(
			fld("_format_version", tString, req(), oneOf("1.1", "2.1", "3.0")),
			fld("_transform", tBoolean, dflt(true)),
			fld("_comment", tString),
			fld("_ignore", tArray, elems(anyField())),
		)
		for _, e := range entityOrder {
			top.add(fld(e, tArray, elems(fld("", tRecord, recOf(s.variant(e, false, pass))))))
		}
		s.top[pass] = top
	}
	return s
}

// children lists the entities that may be nested under parent.
func children(parent string) []string {
	var out []string
	for _, e := range entityOrder {
		for _, fk := range entityDefs[e].foreign {
			if fk.ref == parent {
				out = append(out, e)
			}
		}
	}
	return out
}

// variant is the record an entity is validated with at some position. In
// pass 1 top-level foreign keys are strings (names or ids) and nested ones
// must be null; pass 2 (only run after pass 1 failed) checks resolved
// { id = ... } references.
func (s *schemas) variant(entity string, nested bool, pass int) *record {
	k := variantKey{entity, nested, pass}
	if r := s.variants[k]; r != nil {
		return r
	}
	r := s.base[entity].clone()
	for _, fk := range entityDefs[entity].foreign {
		f := *r.byName[fk.field]
		switch {
		case pass == 2:
		case nested:
			f.eqNull, f.required, f.hasDef, f.def = true, false, true, nil
		default:
			f.typ = tString
		}
		r.add(&f)
	}
	r.add(fld("_comment", tString))
	r.add(fld("_ignore", tArray, elems(anyField())))
	for _, c := range children(entity) {
		r.add(fld(c, tArray, elems(fld("", tRecord, recOf(s.variant(c, true, pass))))))
	}
	s.variants[k] = r
	return r
}

// loaded is a successfully loaded configuration. Entities are shared with
// later loads (see loadCache), so nothing writes to them once loaded; their
// created_at and updated_at are applied when they are shown (stamped).
type loaded struct {
	entities map[string]map[string]map[string]any // type -> id -> entity
	empty    bool
	ids      map[string][]string // type -> sorted ids
	ts, tsMs float64             // process_auto_fields' timestamps for this load

	// For a load made by fastLoad (nil for the others): its entities (with
	// their JSON) by type and id, by type and unique key, and its targets
	// by upstream id and id.
	cached, byKey, targetsOf map[string]map[string]*cachedEntity
}

type refusal struct{ entityType, name string }

// load validates and flattens a declarative configuration. On failure it
// returns Kong's error table.
func (s *schemas) load(input map[string]any, refused []refusal) (*loaded, ltable) {
	if _, ok := input["_transform"]; !ok {
		input["_transform"] = true
	}
	errs := validateRecord(s.top[1], input)
	if errs != nil {
		cp := deepCopy(input).(map[string]any)
		s.populateIDsForValidation(cp)
		if errs2 := validateRecord(s.top[2], cp); errs2 != nil {
			errs = deepMerge(errs2, extractNullErrors(errs))
		} else {
			errs = nil
		}
	}
	if r := refusalErrors(input, "", refused); len(r) > 0 {
		if errs == nil {
			errs = ltable{}
		}
		return nil, deepMerge(errs, r)
	}
	if errs != nil {
		return nil, errs
	}

	s.generateIDs(input, "", nil)
	processed, _ := processAuto(s.top[1], input)
	st := &refState{byID: map[string]map[string]map[string]any{}, byKey: map[string]map[string]map[string]any{}, errs: ltable{}}
	s.populateReferences(processed, "", 0, nil, st)
	st.checkReferences()
	if len(st.errs) > 0 {
		return nil, st.errs
	}
	return s.flatten(st)
}

// refusalErrors injects the faults set with RefuseEntity as entity errors.
func refusalErrors(input map[string]any, parent string, refused []refusal) ltable {
	out := ltable{}
	if len(refused) == 0 {
		return out
	}
	for _, entity := range collectionsUnder(parent) {
		items, _ := input[entity].([]any)
		list := ltable{}
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				continue
			}
			e := refusalErrors(item, entity, refused)
			for _, r := range refused {
				if refusalMatches(r, entity) && naturalName(entity, item) == r.name {
					addEntityError(e, "refused by test")
				}
			}
			if len(e) > 0 {
				list[i+1] = e
			}
		}
		if len(list) > 0 {
			out[entity] = list
		}
	}
	return out
}

func naturalName(entity string, item map[string]any) string {
	key := "name"
	switch entity {
	case "targets":
		key = "target"
	case "consumers":
		key = "username"
	case "certificates", "ca_certificates":
		key = "id"
	}
	s, _ := item[key].(string)
	return s
}

// collectionsUnder returns the entity collections found at the top level
// (parent "") or nested under parent.
func collectionsUnder(parent string) []string {
	if parent == "" {
		return entityOrder
	}
	return children(parent)
}

func childKey(entity, parent string) string {
	for _, fk := range entityDefs[entity].foreign {
		if fk.ref == parent {
			return fk.field
		}
	}
	return ""
}

// uuidKey is get_key_for_uuid_gen: the natural key an id is derived from,
// the cache key when the schema has one, else the endpoint key.
func uuidKey(entity string, item map[string]any, parentID, ckey string) (string, bool) {
	def := entityDefs[entity]
	if def.cacheKey != nil {
		ck := entity + ":*" // entity and workspace
		for _, k := range def.cacheKey {
			v, present := item[k]
			switch x := v.(type) {
			case string:
				ck += ":" + x
			case nil:
				switch {
				case present: // null contributes nothing, as in Kong
				case k == ckey:
					if parentID == "" {
						return "", false
					}
					ck += ":" + parentID
				case k == "upstream" || k == "target" || k == "name":
					return "", false // required fields
				default:
					ck += ":"
				}
			}
		}
		return ck, true
	}
	if ep, ok := item[def.endpointKey]; def.endpointKey != "" && ok && ep != nil {
		key := luaString(ep)
		if !def.endpointUnique {
			for _, fk := range def.foreign {
				if !fk.cascade {
					continue
				}
				if parentID != "" {
					key += ":" + parentID
				} else if v, ok := item[fk.field].(string); ok {
					key += ":" + v
				}
			}
			key += ":*"
		}
		return key, true
	}
	return "", false
}

func hasID(item map[string]any) bool {
	v, ok := item["id"]
	return ok && v != nil
}

// generateIDs fills deterministic ids, like generate_ids. Entities without a
// natural key get an id derived from their position (Kong would pick a random
// one), so that pushing the same config twice yields the same ids. It tells
// whether some id was derived from a position.
func (s *schemas) generateIDs(input map[string]any, parent string, parentItem map[string]any) bool {
	positional := false
	for _, entity := range collectionsUnder(parent) {
		items, _ := input[entity].([]any)
		for i, it := range items {
			if item, ok := it.(map[string]any); ok {
				positional = s.generateItemIDs(entity, item, i, parent, parentItem) || positional
			}
		}
	}
	return positional
}

// generateItemIDs is generateIDs for the item at index i of its collection.
func (s *schemas) generateItemIDs(entity string, item map[string]any, i int, parent string, parentItem map[string]any) bool {
	parentID, ckey := "", ""
	if parentItem != nil {
		parentID, _ = parentItem["id"].(string)
		ckey = childKey(entity, parent)
	}
	positional := false
	if !hasID(item) {
		if key, ok := uuidKey(entity, item, parentID, ckey); ok {
			item["id"] = entityUUID(entity, key)
		} else {
			item["id"] = entityUUID(entity, fmt.Sprintf("%s#%s#%d", parentID, entity, i))
			positional = true
		}
	}
	return s.generateIDs(item, entity, item) || positional
}

// populateIDsForValidation prepares the pass-2 copy: ids everywhere, parent
// keys on nested entities and string references resolved to { id = ... }.
func (s *schemas) populateIDsForValidation(input map[string]any) {
	s.generateIDs(input, "", nil)
	byID := map[string]map[string]map[string]any{}
	byKey := map[string]map[string]map[string]any{}
	var all []struct {
		entity string
		item   map[string]any
	}
	var walk func(m map[string]any, parent string, parentItem map[string]any)
	walk = func(m map[string]any, parent string, parentItem map[string]any) {
		for _, entity := range collectionsUnder(parent) {
			items, _ := m[entity].([]any)
			for _, it := range items {
				item, ok := it.(map[string]any)
				if !ok {
					continue
				}
				walk(item, entity, item)
				register(byID, entity, luaString(item["id"]), item)
				if def := entityDefs[entity]; def.endpointKey != "" {
					if k, ok := item[def.endpointKey].(string); ok {
						register(byKey, entity, k, item)
					}
				}
				if parentItem != nil {
					ck := childKey(entity, parent)
					if _, set := item[ck]; !set {
						item[ck] = map[string]any{"id": parentItem["id"]}
					}
				}
				all = append(all, struct {
					entity string
					item   map[string]any
				}{entity, item})
			}
		}
	}
	walk(input, "", nil)
	for _, e := range all {
		for _, fk := range entityDefs[e.entity].foreign {
			if ref, ok := e.item[fk.field].(string); ok {
				if found := findEntity(byKey, byID, fk.ref, ref); found != nil {
					e.item[fk.field] = map[string]any{"id": found["id"]}
				}
			}
		}
	}
}

func register(m map[string]map[string]map[string]any, entity, key string, item map[string]any) {
	if m[entity] == nil {
		m[entity] = map[string]map[string]any{}
	}
	m[entity][key] = item
}

// finder looks an entity up by unique key, else by id, as findEntity
// does, and tells its id.
type finder func(entity, key string) (id string, found bool)

func (st *refState) find(entity, key string) (string, bool) {
	e := findEntity(st.byKey, st.byID, entity, key)
	id, _ := e["id"].(string)
	return id, e != nil
}

func findEntity(byKey, byID map[string]map[string]map[string]any, entity, key string) map[string]any {
	if e := byKey[entity][key]; e != nil {
		return e
	}
	return byID[entity][key]
}

// stamped is what an entity shows once process_auto_fields gave it its
// timestamps: created_at unless set, updated_at always.
func (l *loaded) stamped(entity string, e map[string]any) map[string]any {
	c := deepCopy(e).(map[string]any)
	ts := l.ts
	if entity == "targets" {
		ts = l.tsMs
	}
	if c["created_at"] == nil {
		c["created_at"] = ts
	}
	c["updated_at"] = ts
	return c
}

type expectedRef struct {
	entity, ref, field string
	value              any
	at                 string
}

type refState struct {
	byID, byKey map[string]map[string]map[string]any
	ids         map[string][]string // registration order per entity
	cacheKeys   map[string]bool
	expected    []expectedRef
	errs        ltable
}

func uniquenessError(entity, key, value string) string {
	return "uniqueness violation: '" + entity + "' entity with " + key + " set to '" + value + "' already declared"
}

// addRefError places an error like declarative_config's add_error: nested
// entities are reported under their direct parent's collection.
func (st *refState) addRefError(parent string, parentIdx int, entity string, idx int, msg string) {
	if parent != "" {
		sec, _ := st.errs[parent].(ltable)
		if sec == nil {
			sec = ltable{}
			st.errs[parent] = sec
		}
		p, _ := sec[parentIdx].(ltable)
		if p == nil {
			p = ltable{}
			sec[parentIdx] = p
		}
		c, _ := p[entity].(ltable)
		if c == nil {
			c = ltable{}
			p[entity] = c
		}
		c[idx] = msg
		return
	}
	sec, _ := st.errs[entity].(ltable)
	if sec == nil {
		sec = ltable{}
		st.errs[entity] = sec
	}
	sec[idx] = msg
}

// populateReferences registers entities by id and unique endpoint key,
// reporting duplicates, and collects the references to check.
func (s *schemas) populateReferences(m map[string]any, parent string, parentIdx int, parentItem map[string]any, st *refState) {
	if st.ids == nil {
		st.ids = map[string][]string{}
		st.cacheKeys = map[string]bool{}
	}
	for _, entity := range collectionsUnder(parent) {
		items, _ := m[entity].([]any)
		def := entityDefs[entity]
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				continue
			}
			s.populateReferences(item, entity, i+1, item, st)
			id := luaString(item["id"])
			failed := false
			key, hasKey := item[def.endpointKey].(string)
			hasKey = hasKey && def.endpointUnique
			if hasKey {
				if st.byKey[entity][key] != nil {
					// Kong files these under the entity's own type,
					// whatever its nesting.
					st.addRefError("", 0, entity, i+1, uniquenessError(entity, def.endpointKey, key))
					failed = true
				} else {
					register(st.byKey, entity, key, item)
				}
			}
			switch {
			case !failed && st.byID[entity][id] != nil:
				st.addRefError(parent, parentIdx, entity, i+1, uniquenessError(entity, "primary key", id))
				failed = true
			case st.byID[entity][id] == nil:
				register(st.byID, entity, id, item)
				st.ids[entity] = append(st.ids[entity], id)
			}
			at := id
			if hasKey {
				at = key
			}
			for _, fk := range def.foreign {
				if v := item[fk.field]; v != nil {
					st.expected = append(st.expected, expectedRef{entity: entity, ref: fk.ref, field: fk.field, value: v, at: at})
				}
			}
			if parentItem != nil {
				item[childKey(entity, parent)] = map[string]any{"id": parentItem["id"]}
			}
			if entity == "plugins" && !failed {
				ck := pluginIdentity(item, st.find)
				if st.cacheKeys[ck] {
					st.addRefError(parent, parentIdx, entity, i+1, uniquenessError(entity, "cache key", ck))
				}
				st.cacheKeys[ck] = true
			}
		}
	}
}

// pluginIdentity is the plugins cache key (name, route, service, consumer)
// with references resolved to ids.
func pluginIdentity(item map[string]any, find finder) string {
	ck := "plugins:" + luaString(item["name"])
	for _, fk := range entityDefs["plugins"].foreign {
		id := ""
		switch v := item[fk.field].(type) {
		case map[string]any:
			id, _ = v["id"].(string)
		case string:
			var found bool
			if id, found = find(fk.ref, v); !found {
				id = v
			}
		}
		ck += ":" + id
	}
	return ck
}

// checkReferences reports references that resolve to no entity, keyed by
// the referring entity's name or id.
func (st *refState) checkReferences() {
	errs := st.errs
	for _, e := range st.expected {
		key := ""
		shown := ""
		switch v := e.value.(type) {
		case string:
			key, shown = v, v
		case map[string]any:
			key, _ = v["id"].(string)
			b, _ := json.Marshal(v)
			shown = string(b)
		}
		if findEntity(st.byKey, st.byID, e.ref, key) != nil {
			continue
		}
		sec, _ := errs[e.entity].(ltable)
		if sec == nil {
			sec = ltable{}
			errs[e.entity] = sec
		}
		list, _ := sec[e.at].(ltable)
		if list == nil {
			list = ltable{}
			sec[e.at] = list
		}
		list[len(list)+1] = "invalid reference '" + e.field + ": " + shown + "' (no such entry in '" + e.ref + "')"
	}
}

// flatten builds the entity map (schema fields only, references as
// { id = ... }) and checks every unique field once more, like Kong does.
func (s *schemas) flatten(st *refState) (*loaded, ltable) {
	out := &loaded{entities: map[string]map[string]map[string]any{}, empty: true}
	var errs ltable
	for _, entity := range entityOrder {
		rec := s.base[entity]
		uniques := map[string]bool{}
		for _, id := range st.ids[entity] {
			item := st.byID[entity][id]
			flat := flattenItem(rec, item, st.find)
			for _, uk := range uniqueKeys(rec, item, flat) {
				if uniques[uk.key] {
					if errs == nil {
						errs = ltable{}
					}
					// Kong rebuilds this table per entity, so only the last one stays.
					key := id
					if ep, ok := item[entityDefs[entity].endpointKey].(string); ok {
						key = ep
					}
					errs[entity] = ltable{key: uniquenessError(entity, uk.field, uk.value)}
				}
				uniques[uk.key] = true
			}
			if out.entities[entity] == nil {
				out.entities[entity] = map[string]map[string]any{}
			}
			out.entities[entity][id] = flat
			out.empty = false
		}
	}
	if errs != nil {
		return nil, errs
	}
	return out, nil
}

// flattenItem keeps the schema fields of a loaded item, with references
// as { id = ... } (string references resolved through find).
func flattenItem(rec *record, item map[string]any, find finder) map[string]any {
	sub := rec.subschemaFor(item)
	flat := make(map[string]any, len(rec.fields))
	for _, base := range rec.fields {
		f := rec.resolve(base.name, sub)
		v, present := item[f.name]
		if !present {
			continue
		}
		if f.typ == tForeign {
			switch x := v.(type) {
			case string:
				if id, found := find(f.ref, x); found {
					flat[f.name] = map[string]any{"id": id}
				}
				continue
			case map[string]any:
				v = map[string]any{"id": x["id"]}
			}
		}
		flat[f.name] = v
	}
	return flat
}

// strRef is a reference by name or id: type and the string.
type strRef struct{ typ, key string }

// stringRefs lists the references flattenItem resolves through other
// entities for item.
func stringRefs(rec *record, item map[string]any) []strRef {
	var out []strRef
	sub := rec.subschemaFor(item)
	for _, base := range rec.fields {
		if f := rec.resolve(base.name, sub); f.typ == tForeign {
			if v, ok := item[f.name].(string); ok {
				out = append(out, strRef{f.ref, v})
			}
		}
	}
	return out
}

type uniqueKey struct{ key, field, value string }

// uniqueKeys lists the unique fields a flattened entity sets, in field order.
func uniqueKeys(rec *record, item, flat map[string]any) []uniqueKey {
	var out []uniqueKey
	sub := rec.subschemaFor(item)
	for _, base := range rec.fields {
		f := rec.resolve(base.name, sub)
		if v := flat[f.name]; f.unique && v != nil {
			out = append(out, uniqueKey{f.name + "\x00" + luaString(v), f.name, luaString(v)})
		}
	}
	return out
}

// configHash is the hash Kong computes for a config sent as a table (form 1):
// a digest of the loaded entities, which a client cannot reproduce.
func (l *loaded) configHash() string {
	if l.empty {
		return emptyHash
	}
	stable := map[string]any{}
	for t, byID := range l.entities {
		m := map[string]any{}
		for id, e := range byID {
			c := deepCopy(e).(map[string]any)
			delete(c, "created_at")
			delete(c, "updated_at")
			m[id] = c
		}
		stable[t] = m
	}
	b, _ := json.Marshal(stable)
	return md5Hex(b)
}

// sortedIDs returns the ids of one entity type in a stable order; the
// slice is shared, callers only read it.
func (l *loaded) sortedIDs(entity string) []string {
	if l.ids != nil {
		return l.ids[entity]
	}
	ids := make([]string, 0, len(l.entities[entity]))
	for id := range l.entities[entity] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// sortedIDsOfAll sorts the ids of every entity type.
func (l *loaded) sortedIDsOfAll() map[string][]string {
	out := map[string][]string{}
	for t := range l.entities {
		out[t] = l.sortedIDs(t)
	}
	return out
}
