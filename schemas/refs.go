package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llmpipeline/pipeline/schemas/internal/fastpath"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// References between schema files. The files of one directory are
// resources under the directory's URL (file:///abs/dir/ for a directory on
// disk, mem:///builtin/ for the embedded examples), so that a relative $ref
// ("address.json", "address.json#/$defs/line") resolves the way a reader
// of the directory expects; a file's top-level $id is a second name for
// it. The compiler's loader serves those files and nothing else: no file
// outside the directory, no network.

// resource is one parsed schema file.
type resource struct {
	doc   any
	canon []byte
}

// schemaDir is the set of files references may reach.
type schemaDir struct {
	base   string // the directory's URL, ending in "/"
	prefix string // what File names start with
	files  map[string]*resource
	// ids maps a file's absolute $id (no fragment) to the files that
	// declare it (more than one: the $id is ambiguous and refused).
	ids map[string][]string
	// failed holds why a schema file of the directory did not load, so a
	// reference to it says so.
	failed map[string]error
}

func newSchemaDir(base, prefix string) *schemaDir {
	return &schemaDir{base: base, prefix: prefix, files: map[string]*resource{},
		ids: map[string][]string{}, failed: map[string]error{}}
}

// dirURL is the file URL of an absolute directory path, ending in "/".
func dirURL(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// urlOf is the URL of a file of the directory.
func (d *schemaDir) urlOf(name string) string {
	base, _ := url.Parse(d.base) // built by dirURL or a constant
	return base.ResolveReference(&url.URL{Path: name}).String()
}

func (d *schemaDir) add(name string, res *resource) {
	d.files[name] = res
	obj, ok := res.doc.(map[string]any)
	if !ok {
		return
	}
	id := topID(obj)
	if id == "" {
		return
	}
	base, _ := url.Parse(d.urlOf(name))
	ref, err := url.Parse(id)
	if err != nil {
		return // the compiler reports the bad $id
	}
	abs := base.ResolveReference(ref)
	abs.Fragment, abs.RawFragment = "", ""
	key := abs.String()
	if key == d.urlOf(name) {
		return
	}
	d.ids[key] = append(d.ids[key], name)
}

// topID is a document's own $id ("id" in draft-04 and earlier), or "".
func topID(obj map[string]any) string {
	if id, ok := obj["$id"].(string); ok {
		return id
	}
	if s, _ := obj["$schema"].(string); strings.Contains(s, "draft-04") || strings.Contains(s, "draft-03") {
		id, _ := obj["id"].(string)
		return id
	}
	return ""
}

// RefError is a $ref that does not reach a file of the schema directory.
type RefError struct {
	// File and Pointer locate the $ref (empty when it could not be found,
	// for a $schema meta-schema say).
	File    string
	Pointer string
	// Ref is the reference as written, URL what it resolves to.
	Ref    string
	URL    string
	Reason string
}

func (e *RefError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("reference to %s refused: %s", e.URL, e.Reason)
	}
	return fmt.Sprintf("%s at %s: $ref %q refused: %s", e.File, "#"+e.Pointer, e.Ref, e.Reason)
}

// resolve maps an absolute URL (no fragment) to a file of the directory.
func (d *schemaDir) resolve(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", &RefError{URL: raw, Reason: "not a URL"}
	}
	u.Fragment, u.RawFragment = "", ""
	if names := d.ids[u.String()]; len(names) == 1 {
		return names[0], nil
	} else if len(names) > 1 {
		return "", &RefError{URL: raw, Reason: fmt.Sprintf("files %s all declare this $id", strings.Join(names, ", "))}
	}
	base, _ := url.Parse(d.base)
	if u.Scheme == base.Scheme && u.Host == base.Host && u.Opaque == "" {
		if u.Path[:strings.LastIndex(u.Path, "/")+1] != base.Path {
			return "", &RefError{URL: raw, Reason: "outside the schema directory (only files of the directory resolve)"}
		}
		name := u.Path[strings.LastIndex(u.Path, "/")+1:]
		if _, ok := d.files[name]; ok {
			return name, nil
		}
		if err, ok := d.failed[name]; ok {
			return "", &RefError{URL: raw, Reason: fmt.Sprintf("%s%s did not load: %v", d.prefix, name, err)}
		}
		return "", &RefError{URL: raw, Reason: fmt.Sprintf("no file %s in the schema directory", name)}
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		return "", &RefError{URL: raw, Reason: "remote references are not fetched (only files of the schema directory resolve, by file name or by their $id)"}
	}
	return "", &RefError{URL: raw, Reason: "not a file of the schema directory"}
}

// dirLoader is the compiler's loader for one compilation: it serves the
// directory's files and records which ones were used, for the version.
type dirLoader struct {
	dir  *schemaDir
	used map[string]bool
}

var _ jsonschema.URLLoader = (*dirLoader)(nil)

func (l *dirLoader) Load(u string) (any, error) {
	name, err := l.dir.resolve(u)
	if err != nil {
		return nil, err
	}
	l.used[name] = true
	return l.dir.files[name].doc, nil
}

// compile compiles the file name of the directory as schema id.
func (d *schemaDir) compile(id, name string) (*Schema, error) {
	res := d.files[name]
	l := &dirLoader{dir: d, used: map[string]bool{}}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(l)
	vocab, err := truthVocab()
	if err != nil {
		return nil, &CompileError{ID: id, Err: fmt.Errorf("preparing x-grounded and x-rules: %w", err)}
	}
	c.RegisterVocabulary(vocab)
	c.AssertVocabs()
	compiled, err := c.Compile(d.urlOf(name))
	if err != nil {
		return nil, &CompileError{ID: id, Err: d.explain(err, name, l.used), Findings: LintRaw(id, res.canon)}
	}
	var deps []string
	for f := range l.used {
		if f != name {
			deps = append(deps, f)
		}
	}
	sort.Strings(deps)
	raw, version := res.canon, versionOf(res.canon, deps, d.files)
	if len(deps) > 0 {
		if b, ok := d.bundle(id, name, deps); ok {
			raw, version = b, VersionOf(b)
		}
	}
	s := &Schema{
		ID:       id,
		Version:  version,
		Raw:      raw,
		Uses:     deps,
		compiled: compiled,
		subs:     map[string]*jsonschema.Schema{},
		printer:  message.NewPrinter(language.English),
	}
	s.Title = compiled.Title
	s.Description = compiled.Description
	indexSubschemas(compiled, s.subs)
	s.truth, s.rules = hasTruth(s.subs)
	s.fast = fastpath.Compile(compiled)
	return s, nil
}

// versionOf hashes a schema's canonical text and, when it references other
// files, their names and canonical texts, so that a change to a referenced
// file is a new version of every schema that uses it.
func versionOf(canon []byte, deps []string, files map[string]*resource) string {
	if len(deps) == 0 {
		return VersionOf(canon)
	}
	h := sha256.New()
	h.Write(canon)
	for _, f := range deps {
		fmt.Fprintf(h, "\x00%s\x00", f)
		h.Write(files[f].canon)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// explain turns the compiler's failure to load a reference into a RefError
// that names the file and the $ref, found among the files the compilation
// read (the schema's own file first).
func (d *schemaDir) explain(err error, name string, used map[string]bool) error {
	var le *jsonschema.LoadURLError
	if !errors.As(err, &le) {
		return err
	}
	re, ok := le.Err.(*RefError)
	if !ok {
		return err
	}
	out := *re
	files := []string{name}
	for f := range used {
		if f != name {
			files = append(files, f)
		}
	}
	sort.Strings(files[1:])
	for _, f := range files {
		if ptr, ref, found := findRef(d.files[f].doc, d.urlOf(f), "", re.URL); found {
			out.File, out.Pointer, out.Ref = d.prefix+f, ptr, ref
			break
		}
	}
	return &out
}

// findRef looks in doc for a $ref (or $schema) that resolves to target,
// following nested $id changes of the base URL.
func findRef(doc any, base, ptr, target string) (string, string, bool) {
	switch v := doc.(type) {
	case map[string]any:
		if id, ok := v["$id"].(string); ok {
			if b, err := joinURL(base, id); err == nil {
				base = b
			}
		}
		for _, kw := range []string{"$ref", "$schema", "$dynamicRef"} {
			if ref, ok := v[kw].(string); ok {
				if u, err := joinURL(base, ref); err == nil && u == target {
					return ptr + "/" + kw, ref, true
				}
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, r, ok := findRef(v[k], base, ptr+"/"+escapePointer(k), target); ok {
				return p, r, true
			}
		}
	case []any:
		for i, x := range v {
			if p, r, ok := findRef(x, base, fmt.Sprintf("%s/%d", ptr, i), target); ok {
				return p, r, true
			}
		}
	}
	return "", "", false
}

// joinURL resolves ref against base and drops the fragment.
func joinURL(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	u := b.ResolveReference(r)
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}
