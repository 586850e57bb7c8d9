package kongdouble

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// POST /config as kong/api/routes/config.lua handles it in DB-less mode.

var yamlTypes = []any{"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"}

// truthy is config.lua's truthy() for flatten_errors.
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x == 1
	case string:
		return isOneOf(strings.ToLower(x), []any{"true", "1", "on", "yes"})
	}
	return false
}

// queryParams mimics ngx.req.get_uri_args: a key without "=" is true.
func queryParams(raw string) map[string]any {
	params := map[string]any{}
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, hasValue := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			continue
		}
		if !hasValue {
			params[key] = true
			continue
		}
		if val, err := url.QueryUnescape(v); err == nil {
			params[key] = val
		}
	}
	return params
}

// formValue is Kong's decode_args for form fields.
func formValue(v string) any {
	switch v {
	case "":
		return nil
	case "true":
		return true
	case "false":
		return false
	}
	return v
}

// bodyParams merges the request body into params the way the admin API
// does; ok is false when an answer was already written.
func bodyParams(w http.ResponseWriter, r *http.Request, body []byte, params map[string]any) bool {
	ct := r.Header.Get("Content-Type")
	media, mparams, _ := mime.ParseMediaType(ct)
	switch {
	case ct == "":
		if len(body) > 0 {
			w.WriteHeader(http.StatusUnsupportedMediaType)
			return false
		}
	case strings.HasPrefix(ct, "application/json"):
		if len(bytes.TrimSpace(body)) == 0 {
			return true
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || m == nil {
			writeJSON(w, http.StatusBadRequest, message("Cannot parse JSON body"))
			return false
		}
		for k, v := range m {
			params[k] = v
		}
	case strings.HasPrefix(ct, "application/x-www-form-urlencoded"):
		values, _ := url.ParseQuery(string(body))
		for k, vs := range values {
			params[k] = formValue(vs[len(vs)-1])
		}
	case strings.HasPrefix(ct, "multipart/form-data"):
		form, err := multipart.NewReader(bytes.NewReader(body), mparams["boundary"]).ReadForm(maxBodySize)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, message("Cannot parse multipart body"))
			return false
		}
		for k, vs := range form.Value {
			params[k] = formValue(vs[len(vs)-1])
		}
	case isOneOf(media, yamlTypes):
		// the raw body is the configuration
	default:
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return false
	}
	return true
}

// unserialize parses a configuration string. Kong tries JSON and then
// YAML; the double only understands the JSON subset of YAML.
func unserialize(s []byte) (map[string]any, string) {
	dec := json.NewDecoder(bytes.NewReader(s))
	var v any
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, "failed parsing declarative configuration: " + err.Error()
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "failed parsing declarative configuration: expected an object"
	}
	return m, ""
}

func (d *Double) postConfig(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.posts++
	status, failing := d.faults.takeFailure()
	refused := append([]refusal(nil), d.faults.refused...)
	d.mu.Unlock()
	if failing {
		writeFailure(w, status)
		return
	}

	body, err := readBody(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, message("Bad request"))
		return
	}
	if len(body) > maxBodySize {
		writeJSON(w, http.StatusRequestEntityTooLarge, message("Payload too large"))
		return
	}
	params := queryParams(r.URL.RawQuery)
	if !bodyParams(w, r, body, params) {
		return
	}
	flatten := truthy(params["flatten_errors"])
	checkHash := luaString(params["check_hash"]) == "1"
	delete(params, "flatten_errors")
	delete(params, "check_hash")

	// The three body forms: the config itself, {"config": "..."}, or a raw
	// document. Only the last two carry a hash a client can reproduce.
	if fv, ok := params["_format_version"]; ok && fv != false {
		if crossCheck != nil {
			crossCheck(d.schemas, body)
		}
		d.loadMu.Lock()
		defer d.loadMu.Unlock()
		result, errs := d.schemas.load(params, refused)
		if errs != nil {
			writeJSON(w, http.StatusBadRequest, declarativeErrorBody(errs, params, flatten))
			return
		}
		d.accept(w, result, "", body, nil)
		return
	}
	var text []byte
	switch c := params["config"].(type) {
	case string:
		text = []byte(c)
	case nil:
		if _, present := params["config"]; present {
			writeJSON(w, http.StatusInternalServerError, message("An unexpected error occurred"))
			return
		}
		if len(body) == 0 {
			writeJSON(w, http.StatusBadRequest, message("expected a declarative configuration"))
			return
		}
		text = body
	default:
		writeJSON(w, http.StatusInternalServerError, message("An unexpected error occurred"))
		return
	}
	// The loaded hash is that of a text that parsed: answering 304 before
	// parsing this one changes nothing.
	hash := md5Hex(text)
	if checkHash && hash == d.ConfigHash() {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if crossCheck != nil {
		crossCheck(d.schemas, text)
	}
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	if len(refused) == 0 {
		if result, next, ok := d.schemas.fastLoad(d.cache, text); ok {
			d.accept(w, result, hash, text, next)
			return
		}
	}
	input, msg := unserialize(text)
	if input == nil {
		writeJSON(w, http.StatusBadRequest, declarativeErrorBody(ltable{"error": msg}, nil, false))
		return
	}
	result, errs := d.schemas.load(input, refused)
	if errs != nil {
		writeJSON(w, http.StatusBadRequest, declarativeErrorBody(errs, input, flatten))
		return
	}
	d.accept(w, result, hash, text, nil)
}

// accept installs a loaded configuration and answers 201. hash is "" for
// a config sent as a table (form 1); next is the load cache to keep, nil
// when the configuration did not go through it. The caller holds loadMu.
func (d *Double) accept(w http.ResponseWriter, result *loaded, hash string, raw []byte, next *loadCache) {
	now := time.Now()
	result.ts, result.tsMs = float64(now.Unix()), float64(now.UnixMilli())/1000
	switch {
	case result.empty:
		hash = emptyHash
	case hash == "":
		hash = result.configHash()
	}
	var rt, srt *router
	if next != nil {
		rt, srt = next.http, next.stream
	} else {
		result.ids = result.sortedIDsOfAll()
		rt, srt = buildRouter(result, d.opts.RouterFlavor, false), buildRouter(result, d.opts.RouterFlavor, true)
		next = &loadCache{gen: d.cache.gen} // the next fastLoad starts from nothing
	}
	d.cache = next
	d.mu.Lock()
	d.config, d.router, d.streamRouter, d.hash, d.raw = result, rt, srt, hash, raw
	d.loads++
	d.mu.Unlock()
	// The answer (11 MB for 3,300 HTTPRoutes) goes out in one write, from a
	// buffer kept across loads.
	d.answer = appendEntities(d.answer[:0], result)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(d.answer)
}

// readBody reads the request body, up to maxBodySize+1 bytes.
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= maxBodySize {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, maxBodySize+1))
	return buf.Bytes(), err
}
