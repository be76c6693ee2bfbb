package schemas

import (
	"bytes"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// bundle returns the canonical text of the schema file name with the files
// it references (deps) inlined under $defs ("definitions" for drafts before
// 2019-09), keyed by file name, and every $ref to them rewritten into a
// local pointer ("address.json#/$defs/line" becomes
// "#/$defs/address.json/$defs/line"). The text then stands alone: it is
// what prompts and providers receive, and they cannot read the directory.
//
// ok is false when the schema uses what the rewrite does not handle
// (anchors, a nested $id, dynamic or recursive refs, a referenced file of
// another draft family, a $defs entry already named like a file), or when
// the bundle does not compile on its own; the caller keeps the schema's own
// text then.
func (d *schemaDir) bundle(id, name string, deps []string) ([]byte, bool) {
	copyOf := func(f string) (map[string]any, bool) {
		// A fresh parse: the directory's documents are shared, never edited.
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.files[f].canon))
		if err != nil {
			return nil, false
		}
		obj, ok := doc.(map[string]any)
		return obj, ok
	}
	root, ok := copyOf(name)
	if !ok {
		return nil, false
	}
	family := draftFamily(root)
	defsKey := "$defs"
	if family == "old" {
		defsKey = "definitions"
	}

	// Every URL a document is known by, mapped to the local pointer prefix
	// of its copy in the bundle.
	targets := map[string]string{}
	bases := map[string]string{} // file -> base URL of its top level
	for _, f := range append([]string{name}, deps...) {
		prefix := "#/" + defsKey + "/" + escapePointer(f)
		if f == name {
			prefix = "#"
		}
		fileURL := d.urlOf(f)
		targets[fileURL] = prefix
		bases[f] = fileURL
		if obj, ok := d.files[f].doc.(map[string]any); ok {
			if sid := topID(obj); sid != "" {
				abs, err := joinURL(fileURL, sid)
				if err != nil {
					return nil, false
				}
				targets[abs], bases[f] = prefix, abs
			}
		}
	}

	defs, _ := root[defsKey].(map[string]any)
	if _, present := root[defsKey]; present && defs == nil {
		return nil, false
	}
	if defs == nil {
		defs = map[string]any{}
	}
	if !rewriteRefs(root, bases[name], targets, true) {
		return nil, false
	}
	for _, f := range deps {
		dep, ok := copyOf(f)
		if !ok || draftFamily(dep) != family && dep["$schema"] != nil {
			return nil, false
		}
		if _, taken := defs[f]; taken {
			return nil, false
		}
		if !rewriteRefs(dep, bases[f], targets, true) {
			return nil, false
		}
		delete(dep, "$id")
		if topID(dep) != "" {
			delete(dep, "id")
		}
		delete(dep, "$schema")
		defs[f] = dep
	}
	root[defsKey] = defs
	out, err := canonicalOf(root)
	if err != nil {
		return nil, false
	}
	alone := newSchemaDir("mem:///", "")
	res, err := parseResource(out, id, Config{}.withDefaults())
	if err != nil {
		return nil, false
	}
	alone.add(id+".json", res)
	if _, err := alone.compile(id, id+".json"); err != nil {
		return nil, false
	}
	return out, true
}

// draftFamily tells drafts that keep subschemas in "definitions" ("old":
// draft-03 to draft-07) from those with "$defs".
func draftFamily(obj map[string]any) string {
	s, _ := obj["$schema"].(string)
	for _, old := range []string{"draft-03", "draft-04", "draft-06", "draft-07"} {
		if strings.Contains(s, old) {
			return "old"
		}
	}
	return "new"
}

// rewriteRefs rewrites, in place, every $ref of v (resolved against base)
// into the local pointer of its target. It reports false for what it does
// not handle. Values that are data, not schemas (enum, const, default,
// examples), are left alone.
func rewriteRefs(v any, base string, targets map[string]string, top bool) bool {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["$id"].(string); ok && !top {
			return false
		}
		if _, ok := x["id"].(string); ok && !top {
			return false // a nested draft-04 id, or an "id" that means nothing: not worth telling apart
		}
		for _, kw := range []string{"$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$recursiveAnchor"} {
			if _, ok := x[kw]; ok {
				return false
			}
		}
		if ref, ok := x["$ref"].(string); ok {
			local, ok := localRef(base, ref, targets)
			if !ok {
				return false
			}
			x["$ref"] = local
		}
		for k, sub := range x {
			switch k {
			case "enum", "const", "default", "examples":
				continue
			}
			if !rewriteRefs(sub, base, targets, false) {
				return false
			}
		}
	case []any:
		for _, sub := range x {
			if !rewriteRefs(sub, base, targets, false) {
				return false
			}
		}
	}
	return true
}

// localRef is the local pointer for ref: its target document's prefix and
// the JSON Pointer of its fragment.
func localRef(base, ref string, targets map[string]string) (string, bool) {
	b, err := url.Parse(base)
	if err != nil {
		return "", false
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", false
	}
	u := b.ResolveReference(r)
	frag := u.EscapedFragment()
	u.Fragment, u.RawFragment = "", ""
	prefix, ok := targets[u.String()]
	if !ok || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return "", false
	}
	if prefix == "#" {
		return "#" + frag, true
	}
	return prefix + frag, true
}
