package kongdouble

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ltable models the Lua tables Kong builds its validation errors in. Keys are
// either strings or (1-based) ints; values are strings or nested ltables.
// Keeping Lua's shape matters: it decides how cjson encodes `fields` and what
// flatten_errors can or cannot flatten.
type ltable map[any]any

// sortedKeys orders ints before strings, like a stable version of Lua's sort.
func (t ltable) sortedKeys() []any {
	keys := make([]any, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, aInt := keys[i].(int)
		b, bInt := keys[j].(int)
		switch {
		case aInt && bInt:
			return a < b
		case aInt != bInt:
			return aInt
		}
		return keys[i].(string) < keys[j].(string)
	})
	return keys
}

// toJSON converts to what cjson would emit: int-keyed tables become arrays
// padded with null, an empty table becomes {}.
func toJSON(v any) any {
	t, ok := v.(ltable)
	if !ok {
		return v
	}
	if len(t) == 0 {
		return map[string]any{}
	}
	maxIdx, allInts := 0, true
	for k := range t {
		i, isInt := k.(int)
		if !isInt || i < 1 {
			allInts = false
			break
		}
		maxIdx = max(maxIdx, i)
	}
	if allInts {
		arr := make([]any, maxIdx)
		for k, val := range t {
			arr[k.(int)-1] = toJSON(val)
		}
		return arr
	}
	obj := make(map[string]any, len(t))
	for k, val := range t {
		obj[fmt.Sprint(k)] = toJSON(val)
	}
	return obj
}

// luaPretty approximates penlight's pretty.write(t, "") used in Kong's
// "declarative config is invalid: ..." message.
func luaPretty(v any) string {
	switch x := v.(type) {
	case ltable:
		var parts []string
		n := 0
		for {
			if _, ok := x[n+1]; !ok {
				break
			}
			n++
			parts = append(parts, luaPretty(x[n]))
		}
		for _, k := range x.sortedKeys() {
			if i, ok := k.(int); ok {
				if i >= 1 && i <= n {
					continue
				}
				parts = append(parts, fmt.Sprintf("[%d]=%s", i, luaPretty(x[k])))
				continue
			}
			ks := k.(string)
			if isLuaIdent(ks) {
				parts = append(parts, ks+"="+luaPretty(x[k]))
			} else {
				parts = append(parts, "["+luaQuote(ks)+"]="+luaPretty(x[k]))
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	case string:
		return luaQuote(x)
	}
	return fmt.Sprint(v)
}

func isLuaIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func luaQuote(s string) string {
	if strings.Contains(s, "\n") && !strings.Contains(s, "]]") {
		return "[[" + s + "]]"
	}
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	return strconv.Quote(s)
}

// deepMerge is kong.tools.utils.deep_merge: b wins unless both are tables.
func deepMerge(a, b ltable) ltable {
	out := ltable{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bt, ok := v.(ltable); ok {
			if at, ok := out[k].(ltable); ok {
				out[k] = deepMerge(at, bt)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// extractNullErrors keeps only the "value must be null" errors, like the
// declarative schema does when merging its two validation passes.
func extractNullErrors(t ltable) ltable {
	out := ltable{}
	for k, v := range t {
		switch x := v.(type) {
		case ltable:
			if r := extractNullErrors(x); len(r) > 0 {
				out[k] = r
			}
		case string:
			if x == "value must be null" {
				out[k] = x
			}
		}
	}
	return out
}

// declarativeErrorBody builds Kong's 400 answer for an invalid declarative
// configuration, optionally with flattened_errors (kong/db/errors.lua).
func declarativeErrorBody(errT ltable, input map[string]any, flatten bool) map[string]any {
	var flattened []any
	if flatten && input != nil {
		flattened = flattenErrors(deepCopy(input).(map[string]any), errT)
	}
	body := map[string]any{
		"code":    14,
		"name":    "invalid declarative configuration",
		"message": "declarative config is invalid: " + luaPretty(errT),
		"fields":  toJSON(errT),
	}
	if flatten && input != nil {
		if len(flattened) == 0 {
			// Lua's empty table encodes as an object.
			body["flattened_errors"] = map[string]any{}
		} else {
			body["flattened_errors"] = flattened
		}
	}
	return body
}

// relation is one foreign-key edge as kong/db/errors.lua sees it.
type relation struct {
	field, entity, reference string
}

// relationsOf lists the foreign fields of an entity type and the ones that
// point at it (in a fixed order, where Kong's is pairs() order).
func relationsOf(entityType string) []relation {
	var rels []relation
	for _, e := range entityOrder {
		for _, fk := range entityDefs[e].foreign {
			if e == entityType || fk.ref == entityType {
				rels = append(rels, relation{field: fk.field, entity: e, reference: fk.ref})
			}
		}
	}
	return rels
}

func singular(noun string) string {
	return strings.TrimSuffix(noun, "s")
}

func makePK(entity map[string]any) map[string]any {
	if id, ok := entity["id"].(string); ok && isUUID(id) {
		return map[string]any{"id": id}
	}
	return nil
}

// flattenErrors ports flatten_errors: it drains errT in place, moving what it
// can into the returned list; whatever it cannot resolve may vanish, as in
// Kong.
func flattenErrors(input map[string]any, errT ltable) []any {
	var flattened []any
	for _, section := range errT.sortedKeys() {
		secErrs := errT[section]
		delete(errT, section)
		st, ok := secErrs.(ltable)
		name, isStr := section.(string)
		entities, isList := input[name].([]any)
		_, isMap := input[name].(map[string]any)
		if !ok || !isStr || !(isList || isMap) {
			errT[section] = secErrs
			continue
		}
		for _, idx := range st.sortedKeys() {
			errI := st[idx]
			delete(st, idx)
			if i, ok := idx.(int); ok && i >= 1 && i <= len(entities) {
				if entity, ok := entities[i-1].(map[string]any); ok {
					addEntityErrors(name, entity, errI, &flattened)
				}
			}
		}
	}
	return flattened
}

func addEntityErrors(entityType string, entity map[string]any, errAny any, flattened *[]any) {
	errT, ok := errAny.(ltable)
	if !ok || len(errT) == 0 {
		return
	}
	pk := makePK(entity)
	for _, ref := range relationsOf(entityType) {
		if ref.entity == entityType {
			fv, ok := entity[ref.field].(map[string]any)
			if !ok {
				continue
			}
			fieldErr := errT[ref.field]
			if p := makePK(fv); p != nil {
				entity[ref.field] = p
			} else {
				delete(entity, ref.field)
			}
			delete(errT, ref.field)
			addEntityErrors(ref.reference, fv, fieldErr, flattened)
			continue
		}
		children, isList := entity[ref.entity].([]any)
		if _, isMap := entity[ref.entity].(map[string]any); !isList && !isMap {
			continue
		}
		delete(entity, ref.entity)
		fieldErr, hasErr := errT[ref.entity]
		delete(errT, ref.entity)
		if !hasErr {
			continue
		}
		childErrs, _ := fieldErr.(ltable)
		for i, item := range children {
			im, ok := item.(map[string]any)
			if !ok {
				continue
			}
			if _, has := im[ref.field]; !has && pk != nil {
				im[ref.field] = pk
			}
			addEntityErrors(ref.entity, im, childErrs[i+1], flattened)
		}
	}
	if len(errT) == 0 {
		return
	}
	entityErrors := categorizeErrors(errT, "", nil)
	if len(entityErrors) == 0 {
		return
	}
	entry := map[string]any{
		"entity_type": singular(entityType),
		"entity":      entity,
		"errors":      entityErrors,
	}
	if name, ok := entity["name"].(string); ok && name != "" {
		entry["entity_name"] = name
	}
	if id, ok := entity["id"].(string); ok && isUUID(id) {
		entry["entity_id"] = id
	}
	if tags, ok := entity["tags"].([]any); ok {
		allStrings := true
		for _, t := range tags {
			if _, ok := t.(string); !ok {
				allStrings = false
			}
		}
		if allStrings {
			entry["entity_tags"] = tags
		}
	}
	*flattened = append(*flattened, entry)
}

func categorizeErrors(errs ltable, ns string, out []any) []any {
	for _, k := range errs.sortedKeys() {
		v := errs[k]
		delete(errs, k)
		if k == "@entity" {
			out = addEntityMessages(v, out)
			continue
		}
		field := fmt.Sprint(k)
		if ns != "" {
			field = ns + "." + field
		}
		switch x := v.(type) {
		case string:
			out = append(out, map[string]any{"type": "field", "field": field, "message": x})
		case ltable:
			out = categorizeErrors(x, field, out)
		}
	}
	return out
}

func addEntityMessages(v any, out []any) []any {
	switch x := v.(type) {
	case ltable:
		for i := 1; ; i++ {
			m, ok := x[i]
			if !ok {
				break
			}
			out = addEntityMessages(m, out)
		}
	case string:
		out = append(out, map[string]any{"type": "entity", "message": x})
	}
	return out
}

// addEntityError appends to a record's "@entity" list.
func addEntityError(errs ltable, msg string) {
	list, _ := errs["@entity"].(ltable)
	if list == nil {
		list = ltable{}
		errs["@entity"] = list
	}
	list[len(list)+1] = msg
}
