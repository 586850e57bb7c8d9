package kongdouble

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A small port of Kong's schema engine (kong/db/schema/init.lua): field
// definitions with Kong's validators, applied in Kong's order and with Kong's
// messages, defaults filled before validation, entity checks and subschemas.

type ftype int

const (
	tString ftype = iota
	tInteger
	tNumber
	tBoolean
	tArray
	tSet
	tMap
	tRecord
	tForeign
	tAny
)

type patErr struct {
	re  *regexp.Regexp
	err string
}

// patAny passes when any pattern matches.
type patAny struct {
	res []*regexp.Regexp
	err string
}

type field struct {
	name     string
	typ      ftype
	required bool
	hasDef   bool
	def      any
	abstract bool

	elements     *field
	keys, values *field
	rec          *record
	ref          string // referenced entity of a foreign field

	eqNull     bool
	ne         any
	oneOf      []any
	between    *[2]float64
	lenMin     *int
	startsWith string
	matchNone  []patErr
	match      *regexp.Regexp
	matchAll   []patErr
	matchAny   *patAny
	uuid       bool
	timestamp  bool
	custom     func(v any) string
	exclusive  [][]string // mutually_exclusive_subsets
	err        string     // replaces any validator message
	unique     bool
}

type record struct {
	fields    []*field
	byName    map[string]*field
	checks    []*echeck
	subKey    string
	subErr    string
	subs      map[string]*subschema
	shorthand func(m map[string]any) ltable
}

type subschema struct {
	fields map[string]*field
	checks []*echeck
}

// echeck is one entry of a schema's entity_checks.
type echeck struct {
	sources     []string
	required    map[string]bool
	missingOK   bool // run_with_missing_fields (checker or argument)
	runIfAllNil bool // the checker's own run_with_missing_fields
	withInvalid bool // run_with_invalid_fields
	fn          func(in map[string]any, errs ltable) (bool, string)
}

func newRecord(fields ...*field) *record {
	r := &record{byName: map[string]*field{}}
	for _, f := range fields {
		r.add(f)
	}
	return r
}

func (r *record) add(f *field) {
	if _, dup := r.byName[f.name]; !dup {
		r.fields = append(r.fields, f)
	} else {
		for i, old := range r.fields {
			if old.name == f.name {
				r.fields[i] = f
			}
		}
	}
	r.byName[f.name] = f
}

// clone copies the record shallowly so variants can replace fields.
func (r *record) clone() *record {
	c := &record{byName: map[string]*field{}, checks: r.checks, subKey: r.subKey, subErr: r.subErr, subs: r.subs, shorthand: r.shorthand}
	for _, f := range r.fields {
		c.add(f)
	}
	return c
}

func (r *record) subschemaFor(in map[string]any) *subschema {
	if r.subKey == "" {
		return nil
	}
	switch k := in[r.subKey].(type) {
	case string:
		return r.subs[k]
	case []any:
		for _, e := range k {
			if s, ok := e.(string); ok && r.subs[s] != nil {
				return r.subs[s]
			}
		}
	}
	return nil
}

func (r *record) resolve(name string, sub *subschema) *field {
	f := r.byName[name]
	if f != nil && sub != nil && sub.fields[name] != nil {
		return sub.fields[name]
	}
	return f
}

// ---- field builders ----

type fopt func(*field)

func fld(name string, t ftype, opts ...fopt) *field {
	f := &field{name: name, typ: t}
	for _, o := range opts {
		o(f)
	}
	return f
}

func req() fopt                 { return func(f *field) { f.required = true } }
func dflt(v any) fopt           { return func(f *field) { f.hasDef, f.def = true, v } }
func oneOf(v ...any) fopt       { return func(f *field) { f.oneOf = v } }
func between(a, b float64) fopt { return func(f *field) { f.between = &[2]float64{a, b} } }
func elems(e *field) fopt       { return func(f *field) { f.elements = e } }
func custom(fn func(v any) string) fopt {
	return func(f *field) { f.custom = fn }
}
func customStr(fn func(s string) string) fopt {
	return custom(func(v any) string { return fn(v.(string)) })
}
func lenMin(n int) fopt     { return func(f *field) { f.lenMin = &n } }
func eqNull() fopt          { return func(f *field) { f.eqNull = true } }
func withErr(e string) fopt { return func(f *field) { f.err = e } }
func unique() fopt          { return func(f *field) { f.unique = true } }
func recOf(r *record) fopt {
	return func(f *field) { f.rec = r }
}
func matchNone(pattern, err string) fopt {
	return func(f *field) { f.matchNone = append(f.matchNone, patErr{regexp.MustCompile(pattern), err}) }
}
func matchAll(pattern, err string) fopt {
	return func(f *field) { f.matchAll = append(f.matchAll, patErr{regexp.MustCompile(pattern), err}) }
}
func matchRe(pattern string) fopt {
	return func(f *field) { f.match = regexp.MustCompile(pattern) }
}
func matchAnyOf(err string, patterns ...string) fopt {
	return func(f *field) {
		f.matchAny = &patAny{err: err}
		for _, p := range patterns {
			f.matchAny.res = append(f.matchAny.res, regexp.MustCompile(p))
		}
	}
}

// ---- value helpers (Lua tables from JSON) ----

// asSeq accepts what Lua's is_sequence accepts: arrays, and the empty table
// whichever JSON spelling it had.
func asSeq(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case map[string]any:
		if len(x) == 0 {
			return []any{}, true
		}
	}
	return nil, false
}

func asTable(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case []any:
		if len(x) == 0 {
			return map[string]any{}, true
		}
	}
	return nil, false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// luaString renders a value the way Lua's tostring would in messages.
func luaString(v any) string {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', 14, 64)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func luaEqual(a, b any) bool {
	switch a.(type) {
	case float64, string, bool:
		return a == b
	}
	return false
}

func isUUID(s string) bool {
	return reUUID.MatchString(s)
}

var reUUID = regexp.MustCompile(`^(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ---- processing: process_auto_fields("insert") without the auto values ----

func processAuto(r *record, data map[string]any) (map[string]any, ltable) {
	out := deepCopy(data).(map[string]any)
	if r.shorthand != nil {
		if errs := r.shorthand(out); errs != nil {
			return nil, errs
		}
	}
	sub := r.subschemaFor(data)
	for _, base := range r.fields {
		f := r.resolve(base.name, sub)
		v, present := out[f.name]
		v, present = adjustField(f, v, present)
		if present {
			out[f.name] = v
		}
	}
	return out, nil
}

func adjustField(f *field, v any, present bool) (any, bool) {
	if f.abstract {
		return v, present
	}
	if f.typ == tRecord && f.rec != nil {
		if (present && v != nil) || (!present && f.required) {
			if !present {
				v, present = missingValue(f)
			}
			if m, ok := asTable(v); ok {
				p, errs := processAuto(f.rec, m)
				if errs == nil {
					return p, true
				}
			}
			return v, present
		}
	} else if present && v != nil {
		switch f.typ {
		case tArray, tSet:
			if seq, ok := v.([]any); ok {
				if f.typ == tSet {
					seq = dedupe(seq)
				}
				for i, e := range seq {
					seq[i], _ = adjustField(f.elements, e, true)
				}
				v = seq
			}
		case tMap:
			if m, ok := v.(map[string]any); ok && f.values != nil {
				for k, e := range m {
					m[k], _ = adjustField(f.values, e, true)
				}
			}
		}
	}
	if !present {
		return missingValue(f)
	}
	return v, true
}

// missingValue is handle_missing_field: default, else null unless required.
func missingValue(f *field) (any, bool) {
	if f.hasDef {
		return deepCopy(f.def), true
	}
	if !f.required {
		return nil, true
	}
	if f.typ == tRecord && f.rec != nil {
		p, _ := processAuto(f.rec, map[string]any{})
		return p, true
	}
	return nil, false
}

func dedupe(seq []any) []any {
	seen := map[any]bool{}
	out := make([]any, 0, len(seq))
	for _, e := range seq {
		switch e.(type) {
		case string, float64, bool:
			if seen[e] {
				continue
			}
			seen[e] = true
		}
		out = append(out, e)
	}
	return out
}

// ---- validation ----

func validateRecord(r *record, in map[string]any) ltable {
	if r.subKey != "" {
		key, present := in[r.subKey]
		if !present || key == nil {
			return ltable{r.subKey: "required field missing"}
		}
		if r.subschemaFor(in) == nil {
			msg := r.subErr
			if msg == "" {
				msg = "unknown type: %s"
			}
			shown := key
			if seq, ok := key.([]any); ok {
				if len(seq) == 0 {
					return ltable{r.subKey: "length must be at least 1"}
				}
				shown = seq[0]
			}
			return ltable{r.subKey: fmt.Sprintf(msg, luaString(shown))}
		}
	}
	sub := r.subschemaFor(in)
	errs := ltable{}
	for _, k := range sortedKeys(in) {
		f := r.resolve(k, sub)
		if f == nil {
			errs[k] = "unknown field"
			continue
		}
		if e := validateField(f, in[k]); e != nil {
			errs[k] = e
		}
	}
	for _, f := range r.fields {
		if v, present := in[f.name]; f.required && (!present || v == nil) {
			errs[f.name] = "required field missing"
		}
	}
	for _, c := range r.checks {
		runCheck(c, in, errs)
	}
	if sub != nil {
		for _, c := range sub.checks {
			runCheck(c, in, errs)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func runCheck(c *echeck, in map[string]any, errs ltable) {
	var missing []string
	allNil, allOK := true, true
	for _, name := range c.sources {
		if _, present := in[name]; present {
			allNil = false
		} else if !c.missingOK && c.required[name] {
			missing = append(missing, name)
		}
		if _, bad := errs[name]; bad {
			allOK = false
		}
	}
	if (!allOK && !c.withInvalid) || (allNil && !c.runIfAllNil) {
		return
	}
	if len(missing) > 0 {
		for _, name := range missing {
			errs[name] = "field required for entity check"
		}
		return
	}
	if ok, msg := c.fn(in, errs); !ok {
		addEntityError(errs, msg)
	}
}

// validateField returns nil, a message, or an ltable of nested errors.
func validateField(f *field, v any) any {
	if v == nil {
		if f.required {
			return "required field missing"
		}
		return nil
	}
	if f.eqNull {
		return orErr(f, "value must be null")
	}
	switch f.typ {
	case tArray, tSet:
		seq, ok := asSeq(v)
		if !ok {
			if f.typ == tSet {
				return "expected a set"
			}
			return "expected an array"
		}
		el := *f.elements
		el.required = true
		errs := ltable{}
		seen := map[any]bool{}
		for i, e := range seq {
			if f.typ == tSet {
				if _, hashable := e.(string); hashable && seen[e] {
					continue
				}
				if _, hashable := e.(string); hashable {
					seen[e] = true
				}
			}
			if er := validateField(&el, e); er != nil {
				errs[i+1] = er
			}
		}
		if len(errs) > 0 {
			return errs
		}
	case tMap:
		m, ok := asTable(v)
		if !ok {
			return "expected a map"
		}
		k, val := *f.keys, *f.values
		k.required, val.required = true, true
		for _, key := range sortedKeys(m) {
			if er := validateField(&k, key); er != nil {
				return er
			}
			if er := validateField(&val, m[key]); er != nil {
				return er
			}
		}
	case tRecord:
		m, ok := asTable(v)
		if !ok {
			return "expected a record"
		}
		if f.rec != nil {
			cp, errs := processAuto(f.rec, m)
			if errs != nil {
				return errs
			}
			if errs := validateRecord(f.rec, cp); errs != nil {
				return errs
			}
		}
	case tForeign:
		return validateForeignKey(v)
	case tInteger:
		n, ok := v.(float64)
		if !ok || n != math.Trunc(n) || math.IsInf(n, 0) {
			return "expected an integer"
		}
	case tNumber:
		if _, ok := v.(float64); !ok {
			return "expected a number"
		}
	case tBoolean:
		if _, ok := v.(bool); !ok {
			return "expected a boolean"
		}
	case tString:
		if _, ok := v.(string); !ok {
			return "expected a string"
		}
	}
	if msg := runValidators(f, v); msg != "" {
		return msg
	}
	return nil
}

// validateForeignKey is validate_primary_key for a { id = ... } reference.
func validateForeignKey(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return ltable{"id": "missing primary key"}
	}
	id, present := m["id"]
	switch {
	case !present || id == false:
		return ltable{"id": "missing primary key"}
	case id == nil:
		return ltable{"id": "required field missing"}
	}
	s, ok := id.(string)
	if !ok {
		return ltable{"id": "expected a string"}
	}
	if !isUUID(s) {
		return ltable{"id": "expected a valid UUID"}
	}
	return nil
}

func orErr(f *field, msg string) string {
	if f.err != "" {
		return f.err
	}
	return msg
}

func valueLen(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	}
	return 0
}

func joinLua(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = luaString(v)
	}
	return strings.Join(parts, ", ")
}

// runValidators applies Kong's validators in Schema.validators_order.
func runValidators(f *field, v any) string {
	if f.ne != nil && luaEqual(f.ne, v) {
		return orErr(f, "value must not be "+luaString(v))
	}
	if f.oneOf != nil {
		found := false
		for _, o := range f.oneOf {
			if luaEqual(o, v) {
				found = true
			}
		}
		if !found {
			return orErr(f, "expected one of: "+joinLua(f.oneOf))
		}
	}
	if f.timestamp {
		if n, _ := v.(float64); n <= 0 {
			return orErr(f, "expected a valid timestamp")
		}
	}
	if f.uuid {
		if s, _ := v.(string); !isUUID(s) {
			return orErr(f, "expected a valid UUID")
		}
	}
	if f.between != nil {
		if n, _ := v.(float64); n < f.between[0] || n > f.between[1] {
			return orErr(f, fmt.Sprintf("value should be between %d and %d", int64(f.between[0]), int64(f.between[1])))
		}
	}
	minLen := f.lenMin
	if f.typ == tString && minLen == nil {
		one := 1
		minLen = &one
	}
	if minLen != nil && valueLen(v) < *minLen {
		return orErr(f, fmt.Sprintf("length must be at least %d", *minLen))
	}
	s, isStr := v.(string)
	if isStr {
		if f.startsWith != "" && !strings.HasPrefix(s, f.startsWith) {
			return orErr(f, "should start with: "+f.startsWith)
		}
		for _, p := range f.matchNone {
			if p.re.MatchString(s) {
				return orErr(f, p.err)
			}
		}
		if f.match != nil && !f.match.MatchString(s) {
			return orErr(f, "invalid value: "+s)
		}
		for _, p := range f.matchAll {
			if !p.re.MatchString(s) {
				return orErr(f, p.err)
			}
		}
		if f.matchAny != nil {
			ok := false
			for _, re := range f.matchAny.res {
				if re.MatchString(s) {
					ok = true
				}
			}
			if !ok {
				return orErr(f, f.matchAny.err)
			}
		}
	}
	if f.custom != nil {
		if msg := f.custom(v); msg != "" {
			return orErr(f, msg)
		}
	}
	if f.exclusive != nil {
		if msg := exclusiveSubsets(f.exclusive, v); msg != "" {
			return orErr(f, msg)
		}
	}
	return ""
}

func exclusiveSubsets(subsets [][]string, v any) string {
	seq, _ := asSeq(v)
	owner := map[string]int{}
	for i, s := range subsets {
		for _, e := range s {
			owner[e] = i
		}
	}
	var used []int
	seen := map[int]bool{}
	for _, e := range seq {
		s, _ := e.(string)
		if i, ok := owner[s]; ok && !seen[i] {
			seen[i] = true
			used = append(used, i)
		}
	}
	if len(used) <= 1 {
		return ""
	}
	parts := make([]string, len(used))
	for i, u := range used {
		parts[i] = "(" + quotedList(subsets[u]) + ")"
	}
	return "these sets are mutually exclusive: " + strings.Join(parts, ", ")
}

func quotedList(words []string) string {
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = "'" + w + "'"
	}
	return strings.Join(parts, ", ")
}

// isNonEmpty is Kong's is_nonempty.
func isNonEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// ---- entity check builders ----

func atLeastOneOf(names ...string) *echeck {
	return &echeck{sources: names, missingOK: true, runIfAllNil: true, withInvalid: true,
		fn: func(in map[string]any, _ ltable) (bool, string) {
			for _, n := range names {
				if isNonEmpty(in[n]) {
					return true, ""
				}
			}
			return false, "at least one of these fields must be non-empty: " + quotedList(names)
		}}
}

func mutuallyRequired(names ...string) *echeck {
	return &echeck{sources: names, missingOK: true, runIfAllNil: true, withInvalid: true,
		fn: func(in map[string]any, _ ltable) (bool, string) {
			n := 0
			for _, name := range names {
				if isNonEmpty(in[name]) {
					n++
				}
			}
			if n == 0 || n == len(names) {
				return true, ""
			}
			return false, "all or none of these fields must be set: " + quotedList(names)
		}}
}

// conditional is the "conditional" checker: when ifMatch(if value) holds,
// thenCheck judges the then field (returning its field error, or "").
func conditional(ifField, thenField string, ifMatch func(v any) bool, thenCheck func(v any) string, thenErr string) *echeck {
	return &echeck{sources: []string{ifField, thenField}, required: map[string]bool{ifField: true}, withInvalid: true,
		fn: func(in map[string]any, errs ltable) (bool, string) {
			if !ifMatch(in[ifField]) {
				return true, ""
			}
			if msg := thenCheck(in[thenField]); msg != "" {
				errs[thenField] = msg
				if thenErr != "" {
					return false, thenErr
				}
				return false, "failed conditional validation given value of field '" + ifField + "'"
			}
			return true, ""
		}}
}

func mustBeNull(v any) string {
	if v != nil {
		return "value must be null"
	}
	return ""
}

// customCheck is custom_entity_check: it only runs when all its fields are
// valid and present.
func customCheck(sources []string, missingOK bool, fn func(in map[string]any) string) *echeck {
	req := map[string]bool{}
	for _, s := range sources {
		req[s] = true
	}
	return &echeck{sources: sources, required: req, missingOK: missingOK,
		fn: func(in map[string]any, _ ltable) (bool, string) {
			if msg := fn(in); msg != "" {
				return false, msg
			}
			return true, ""
		}}
}
