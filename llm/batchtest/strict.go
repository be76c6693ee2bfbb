package batchtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// OpenAI's Structured Outputs in strict mode take a subset of JSON Schema
// (the "Supported schemas" section of its guide): every object closed
// (additionalProperties false) with every property in required; the root
// an object; every schema with a type (or an enum, const, anyOf or $ref);
// the keywords below and no others. The API refuses any other schema with
// a 400 before the model runs.
var strictKeywords = map[string]bool{
	"type": true, "description": true, "title": true, "enum": true, "const": true,
	"anyOf": true, "$ref": true, "$defs": true, "definitions": true,
	"properties": true, "required": true, "additionalProperties": true, "items": true,
	"pattern": true, "format": true,
	"multipleOf": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minItems": true, "maxItems": true,
	// Annotations the guide does not list; the check lets them pass
	// rather than refuse what the API may take.
	"$schema": true, "$id": true, "$comment": true,
}

var strictFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}

// StrictSchemaError checks a response_format json_schema sent with strict
// true as OpenAI does, and returns the API's message for the first rule it
// breaks ("" when it breaks none).
func StrictSchemaError(name string, schema any) string {
	root, ok := schema.(map[string]any)
	if !ok || root["type"] != "object" {
		return fmt.Sprintf("Invalid schema for response_format '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%v\"'.", name, typeOf(schema))
	}
	if msg := checkStrict(root, nil); msg != "" {
		return fmt.Sprintf("Invalid schema for response_format '%s': %s", name, msg)
	}
	return ""
}

func typeOf(s any) any {
	if m, ok := s.(map[string]any); ok {
		return m["type"]
	}
	return nil
}

func checkStrict(s map[string]any, path []string) string {
	ctx := "In context=(" + quoted(path) + "), "
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !strictKeywords[k] {
			return ctx + fmt.Sprintf("'%s' is not permitted.", k)
		}
	}
	if f, ok := s["format"].(string); ok && !slices.Contains(strictFormats, f) {
		return ctx + fmt.Sprintf("'%s' is not a supported format.", f)
	}
	_, hasType := s["type"]
	_, hasAny := s["anyOf"]
	_, hasRef := s["$ref"]
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	if !hasType && !hasAny && !hasRef && !hasEnum && !hasConst {
		return ctx + "schema must have a 'type' key."
	}
	props, hasProps := s["properties"].(map[string]any)
	if isType(s["type"], "object") || hasProps {
		if ap, ok := s["additionalProperties"]; !ok || ap != false {
			return ctx + "'additionalProperties' is required to be supplied and to be false."
		}
		req, _ := s["required"].([]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if !slices.Contains(req, any(n)) {
				return ctx + fmt.Sprintf("'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", n)
			}
		}
		for _, n := range names {
			ps, ok := props[n].(map[string]any)
			if !ok {
				return ctx + fmt.Sprintf("property '%s' must be a schema.", n)
			}
			if msg := checkStrict(ps, append(slices.Clone(path), "properties", n)); msg != "" {
				return msg
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		if msg := checkStrict(items, append(slices.Clone(path), "items")); msg != "" {
			return msg
		}
	}
	if list, ok := s["anyOf"].([]any); ok {
		for i, b := range list {
			bs, ok := b.(map[string]any)
			if !ok {
				return ctx + "anyOf must hold schemas."
			}
			if msg := checkStrict(bs, append(slices.Clone(path), "anyOf", fmt.Sprint(i))); msg != "" {
				return msg
			}
		}
	}
	for _, dk := range []string{"$defs", "definitions"} {
		defs, _ := s[dk].(map[string]any)
		for n, d := range defs {
			ds, ok := d.(map[string]any)
			if !ok {
				return ctx + dk + " must hold schemas."
			}
			if msg := checkStrict(ds, append(slices.Clone(path), dk, n)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func isType(t any, want string) bool {
	switch t := t.(type) {
	case string:
		return t == want
	case []any:
		return slices.Contains(t, any(want))
	}
	return false
}

func quoted(path []string) string {
	q := make([]string, len(path))
	for i, p := range path {
		q[i] = "'" + p + "'"
	}
	if len(q) == 1 {
		return q[0] + ","
	}
	return strings.Join(q, ", ")
}

// StrictRefusal writes OpenAI's answer to a request whose strict schema
// it refuses: 400, an invalid_request_error on param response_format. It
// reports whether it refused (body is the request's, decoded): a request
// without a strict json_schema response_format passes.
func StrictRefusal(w http.ResponseWriter, body map[string]any) bool {
	rf, _ := body["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["strict"] != true {
		return false
	}
	name, _ := js["name"].(string)
	msg := StrictSchemaError(name, js["schema"])
	if msg == "" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": "response_format", "code": nil}})
	return true
}
