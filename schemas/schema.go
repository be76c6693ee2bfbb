package schemas

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed builtin/*.json
var builtinFS embed.FS

// Schema is one compiled JSON Schema. It is immutable after Compile and safe
// for concurrent use by many goroutines.
type Schema struct {
	// ID is the schema id: the file name without .json or .schema.json.
	ID string
	// Version is a short hex hash (12 characters) of Raw, the canonical text.
	Version string
	// File is the file the schema was loaded from ("builtin/<id>.json" for
	// the embedded examples, "" when compiled from bytes).
	File string
	// Raw is the canonical schema text: keys sorted, no insignificant
	// whitespace. It is what providers and prompts receive.
	Raw json.RawMessage
	// Title and Description are the schema's top-level annotations (they go
	// into prompts).
	Title       string
	Description string

	compiled *jsonschema.Schema
	// subs maps every compiled subschema's location to it, so a validation
	// error's schema location can be turned into what the schema expects.
	subs    map[string]*jsonschema.Schema
	printer *message.Printer
	// fast accepts most valid documents without the general validator
	// (fast.go); nil when the root uses a keyword it does not decide.
	fast *fastNode
}

// Registry is a set of compiled schemas by id. It is read-only after Load
// and safe for concurrent use.
type Registry struct {
	schemas map[string]*Schema
}

// CompileError says which schema file failed to compile and why.
type CompileError struct {
	ID   string
	File string
	Err  error
	// Findings are the static lint findings for the file, which often name
	// the real cause (an empty enum, a bad pattern).
	Findings []Finding
}

func (e *CompileError) Error() string {
	where := e.File
	if where == "" {
		where = e.ID
	}
	s := fmt.Sprintf("compiling schema %s: %v", where, e.Err)
	for _, f := range e.Findings {
		s += fmt.Sprintf("; lint %s at %s: %s", f.Rule, f.Path, f.Message)
	}
	return s
}

func (e *CompileError) Unwrap() error { return e.Err }

// Builtin returns the example schemas shipped with the binary: invoice,
// ticket and shipment.
func Builtin() (*Registry, error) {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		return nil, fmt.Errorf("opening built-in schemas: %w", err)
	}
	return loadFS(sub, "builtin/")
}

// Load compiles every *.json file of dir (not recursive). The id of a schema
// is its file name without .schema.json or .json. dir "" means Builtin().
// A file that does not parse or compile is a *CompileError naming the file
// and the reason.
func Load(dir string) (*Registry, error) {
	if dir == "" {
		return Builtin()
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("loading schemas: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("loading schemas: %s is not a directory", dir)
	}
	return loadFS(os.DirFS(dir), strings.TrimRight(dir, string(filepath.Separator))+string(filepath.Separator))
}

// IDFromFile returns the schema id for a file name, and false when the file
// is not a schema file (.json).
func IDFromFile(name string) (string, bool) {
	base := filepath.Base(name)
	switch {
	case strings.HasSuffix(base, ".schema.json") && len(base) > len(".schema.json"):
		return strings.TrimSuffix(base, ".schema.json"), true
	case strings.HasSuffix(base, ".json") && len(base) > len(".json"):
		return strings.TrimSuffix(base, ".json"), true
	}
	return "", false
}

// schemaFiles lists the schema files of fsys, sorted, with their ids, and
// refuses two files with the same id.
func schemaFiles(fsys fs.FS, prefix string) ([]string, map[string]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, nil, fmt.Errorf("listing schemas in %s: %w", prefix, err)
	}
	ids := map[string]string{}  // file -> id
	seen := map[string]string{} // id -> file
	var files []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		id, ok := IDFromFile(e.Name())
		if !ok {
			continue
		}
		if other, dup := seen[id]; dup {
			return nil, nil, fmt.Errorf("loading schemas: %s and %s both define schema id %q", prefix+other, prefix+e.Name(), id)
		}
		seen[id] = e.Name()
		ids[e.Name()] = id
		files = append(files, e.Name())
	}
	sort.Strings(files)
	return files, ids, nil
}

func loadFS(fsys fs.FS, prefix string) (*Registry, error) {
	files, ids, err := schemaFiles(fsys, prefix)
	if err != nil {
		return nil, err
	}
	r := &Registry{schemas: make(map[string]*Schema, len(files))}
	for _, name := range files {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("reading schema %s: %w", prefix+name, err)
		}
		s, err := Compile(ids[name], raw)
		if err != nil {
			var ce *CompileError
			if errors.As(err, &ce) {
				ce.File = prefix + name
				for i := range ce.Findings {
					ce.Findings[i].File = ce.File
				}
			}
			return nil, err
		}
		s.File = prefix + name
		r.schemas[s.ID] = s
	}
	return r, nil
}

// NewRegistry builds a registry from compiled schemas; a repeated id is an
// error.
func NewRegistry(ss ...*Schema) (*Registry, error) {
	r := &Registry{schemas: make(map[string]*Schema, len(ss))}
	for _, s := range ss {
		if _, dup := r.schemas[s.ID]; dup {
			return nil, fmt.Errorf("building registry: schema id %q given twice", s.ID)
		}
		r.schemas[s.ID] = s
	}
	return r, nil
}

// Get returns the schema with the given id.
func (r *Registry) Get(id string) (*Schema, bool) {
	s, ok := r.schemas[id]
	return s, ok
}

// IDs returns the schema ids, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.schemas))
	for id := range r.schemas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Canonical returns the canonical text of a JSON document: object keys
// sorted, no insignificant whitespace, numbers as written, no HTML escaping.
func Canonical(raw []byte) ([]byte, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// VersionOf returns the version hash of canonical schema text.
func VersionOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:12]
}

// Compile parses and compiles one schema. The default draft is 2020-12;
// formats are asserted; references outside the document are refused (no file
// or network access).
func Compile(id string, raw []byte) (*Schema, error) {
	if id == "" {
		return nil, errors.New("compiling schema: empty id")
	}
	canon, err := Canonical(raw)
	if err != nil {
		return nil, &CompileError{ID: id, Err: fmt.Errorf("parsing JSON: %w", err)}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return nil, &CompileError{ID: id, Err: fmt.Errorf("parsing JSON: %w", err)}
	}
	if _, ok := doc.(map[string]any); !ok {
		if _, isBool := doc.(bool); !isBool {
			return nil, &CompileError{ID: id, Err: fmt.Errorf("a schema must be a JSON object or boolean, got %s", jsonTypeName(doc))}
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file, no network
	loc := "mem:///" + id + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, &CompileError{ID: id, Err: err, Findings: LintRaw(id, raw)}
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, &CompileError{ID: id, Err: err, Findings: LintRaw(id, raw)}
	}
	s := &Schema{
		ID:       id,
		Version:  VersionOf(canon),
		Raw:      json.RawMessage(canon),
		compiled: compiled,
		subs:     map[string]*jsonschema.Schema{},
		printer:  message.NewPrinter(language.English),
	}
	s.Title = compiled.Title
	s.Description = compiled.Description
	indexSubschemas(compiled, s.subs)
	if f := compileFast(compiled); !f.opaque {
		s.fast = f
	}
	return s, nil
}

// indexSubschemas records every subschema reachable from sch by location.
func indexSubschemas(sch *jsonschema.Schema, into map[string]*jsonschema.Schema) {
	if sch == nil {
		return
	}
	if _, seen := into[sch.Location]; seen {
		return
	}
	into[sch.Location] = sch
	walk := func(ss ...*jsonschema.Schema) {
		for _, x := range ss {
			indexSubschemas(x, into)
		}
	}
	walk(sch.Ref, sch.RecursiveRef, sch.Not, sch.If, sch.Then, sch.Else, sch.PropertyNames,
		sch.UnevaluatedProperties, sch.Contains, sch.Items2020, sch.UnevaluatedItems, sch.ContentSchema)
	if sch.DynamicRef != nil {
		walk(sch.DynamicRef.Ref)
	}
	walk(sch.AllOf...)
	walk(sch.AnyOf...)
	walk(sch.OneOf...)
	walk(sch.PrefixItems...)
	for _, x := range sch.Properties {
		walk(x)
	}
	for _, x := range sch.PatternProperties {
		walk(x)
	}
	for _, x := range sch.DependentSchemas {
		walk(x)
	}
	for _, x := range sch.Dependencies {
		if d, ok := x.(*jsonschema.Schema); ok {
			walk(d)
		}
	}
	for _, x := range []any{sch.AdditionalProperties, sch.Items, sch.AdditionalItems} {
		switch v := x.(type) {
		case *jsonschema.Schema:
			walk(v)
		case []*jsonschema.Schema:
			walk(v...)
		}
	}
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
