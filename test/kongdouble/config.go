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
func unserialize(s string) (map[string]any, string) {
	dec := json.NewDecoder(strings.NewReader(s))
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

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodySize+1))
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
	var input map[string]any
	var raw []byte
	newHash := ""
	if fv, ok := params["_format_version"]; ok && fv != false {
		input, raw = params, body
	} else {
		var text string
		switch c := params["config"].(type) {
		case string:
			text = c
		case nil:
			if _, present := params["config"]; present {
				writeJSON(w, http.StatusInternalServerError, message("An unexpected error occurred"))
				return
			}
			if len(body) == 0 {
				writeJSON(w, http.StatusBadRequest, message("expected a declarative configuration"))
				return
			}
			text = string(body)
		default:
			writeJSON(w, http.StatusInternalServerError, message("An unexpected error occurred"))
			return
		}
		var msg string
		if input, msg = unserialize(text); input == nil {
			writeJSON(w, http.StatusBadRequest, declarativeErrorBody(ltable{"error": msg}, nil, false))
			return
		}
		raw, newHash = []byte(text), md5Hex([]byte(text))
	}

	if checkHash && newHash != "" && newHash == d.ConfigHash() {
		w.WriteHeader(http.StatusNotModified)
		return
	}

	result, errs := d.schemas.load(input, refused)
	if errs != nil {
		writeJSON(w, http.StatusBadRequest, declarativeErrorBody(errs, input, flatten))
		return
	}
	hash := newHash
	switch {
	case result.empty:
		hash = emptyHash
	case hash == "":
		hash = result.configHash()
	}
	rt := buildRouter(result, d.opts.RouterFlavor, false)
	srt := buildRouter(result, d.opts.RouterFlavor, true)
	d.mu.Lock()
	d.config, d.router, d.streamRouter, d.hash, d.raw = result, rt, srt, hash, raw
	d.loads++
	d.mu.Unlock()
	writeJSON(w, http.StatusCreated, responseEntities(result))
}

// responseEntities is the flattened entity map POST /config answers with,
// including the default workspace Kong inserts.
func responseEntities(l *loaded) map[string]any {
	out := map[string]any{
		"workspaces": map[string]any{defaultWorkspaceID: map[string]any{
			"id": defaultWorkspaceID, "name": "default", "comment": nil,
			"config": map[string]any{}, "meta": map[string]any{},
		}},
	}
	for entity, byID := range l.entities {
		m := map[string]any{}
		for id, e := range byID {
			m[id] = e
		}
		out[entity] = m
	}
	return out
}
