package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on one schema file, checked before the file is parsed in full or
// compiled: a schema over them is refused, not loaded slowly. The defaults
// sit well above every schema of the SchemaStore catalogue (its largest file
// is about 7.6 MB, its deepest nesting 22 levels).
const (
	DefaultMaxFileBytes = 16 << 20 // 16 MiB
	DefaultMaxDepth     = 128      // nested arrays and objects
)

// Config sets the limits of loading schema files. The zero value means the
// defaults.
type Config struct {
	// MaxFileBytes refuses a schema file larger than this many bytes
	// (0: DefaultMaxFileBytes).
	MaxFileBytes int64
	// MaxDepth refuses a schema file whose arrays and objects nest deeper
	// than this (0: DefaultMaxDepth). The check streams the file's tokens,
	// so a deep file is refused before it is parsed or compiled.
	MaxDepth int
}

func (c Config) withDefaults() Config {
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	return c
}

func (c Config) validate() error {
	if c.MaxFileBytes < 0 {
		return fmt.Errorf("schema size limit must be positive, got %d", c.MaxFileBytes)
	}
	if c.MaxDepth < 0 {
		return fmt.Errorf("schema depth limit must be positive, got %d", c.MaxDepth)
	}
	return nil
}

// LimitError says that a schema file is over a loading limit (Config). It
// comes wrapped in the *CompileError that names the file.
type LimitError struct {
	File  string
	Limit string // "size" or "depth"
	Max   int64
	// Size is the file's size in bytes, for the size limit.
	Size int64
}

func (e *LimitError) Error() string {
	if e.Limit == "size" {
		return fmt.Sprintf("the file is %d bytes, over the schema size limit of %d bytes", e.Size, e.Max)
	}
	return fmt.Sprintf("the file nests arrays and objects deeper than the schema depth limit of %d levels", e.Max)
}

// allowedIDChars is how a user is told what a schema id may hold.
const allowedIDChars = "1 to 255 bytes of printable UTF-8 (no control or format characters)"

// NameError says that a schema file's name cannot give a schema id.
type NameError struct {
	File string
	ID   string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("file name %q cannot be a schema id: %q is not %s (rename the file; .json or .schema.json is not part of the id)",
		filepath.Base(e.File), e.ID, allowedIDChars)
}

// maxIDBytes bounds a schema id, as job.MaxSchemaIDBytes does.
const maxIDBytes = 255

// ValidID reports whether id can be a schema id: 1 to 255 bytes of UTF-8
// whose every character is printable (unicode.IsPrint: letters, marks,
// numbers, punctuation, symbols and the ASCII space; not U+FFFD, what
// invalid UTF-8 reads as). Dots and spaces are part of the id: "ticket.v2",
// "foo-1.0.0", "My Invoice". The rule is job.ValidSchemaID's, the ids a
// job's schema may name; subjects carry them encoded (broker.SchemaToken).
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > maxIDBytes || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// parseError marks a file that is not JSON (or not a schema-shaped JSON
// value), so lint can tell it from a schema that does not compile.
type parseError struct{ err error }

func (e *parseError) Error() string { return "parsing JSON: " + e.err.Error() }
func (e *parseError) Unwrap() error { return e.err }

// duplicateError marks two files that give the same schema id.
type duplicateError struct {
	ID    string
	Files []string
}

func (e *duplicateError) Error() string {
	return fmt.Sprintf("%s both define schema id %q", strings.Join(e.Files, " and "), e.ID)
}

// Builtin returns the example schemas shipped with the binary: invoice,
// ticket and shipment.
func Builtin() (*Registry, error) {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		return nil, fmt.Errorf("opening built-in schemas: %w", err)
	}
	r, err := loadFS(sub, "builtin/", "mem:///builtin/", Config{}.withDefaults())
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("loading built-in schemas: %w", err)
	}
	return r, nil
}

// Load is LoadWith(dir, Config{}): the default limits.
func Load(dir string) (*Registry, error) {
	return LoadWith(dir, Config{})
}

// LoadWith compiles every *.json file of dir (not recursive); dir "" means
// Builtin(). The id of a schema is its file name without .schema.json or
// .json.
//
// A $ref from one file to another of the same directory resolves, by file
// name ("address.json", "address.json#/$defs/line") or by the other file's
// $id; a schema's version covers every file it references. Any other
// reference (http(s), another directory) is refused, naming the file and the
// ref.
//
// A file that cannot be a schema (its name is not a valid id, it is over a
// limit of cfg, it does not parse or compile, or its id is taken twice)
// does not stop the others: it is listed by Broken, with its error, and
// Err joins those errors. The returned error is only for a directory that
// cannot be read, or a bad cfg.
func LoadWith(dir string, cfg Config) (*Registry, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("loading schemas: %w", err)
	}
	cfg = cfg.withDefaults()
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
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("loading schemas: %w", err)
	}
	prefix := strings.TrimRight(dir, string(filepath.Separator)) + string(filepath.Separator)
	return loadFS(os.DirFS(dir), prefix, dirURL(abs), cfg)
}

// IDFromFile returns the schema id for a file name, and false when the file
// is not a schema file (.json). The id may still be invalid (ValidID).
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

// loadFS loads the schema files of fsys; prefix names them for people
// (File), base is the directory's URL that references resolve against.
func loadFS(fsys fs.FS, prefix, base string, cfg Config) (*Registry, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("listing schemas in %s: %w", prefix, err)
	}
	d := newSchemaDir(base, prefix)
	r := &Registry{schemas: map[string]*Schema{}, broken: map[string]*CompileError{}}
	byID := map[string][]string{} // id -> file names
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		id, ok := IDFromFile(name)
		if !ok {
			continue
		}
		file := prefix + name
		res, err := readResource(fsys, name, file, cfg)
		if !ValidID(id) {
			// Not a schema of its own, but other files may still
			// reference it by file name or $id.
			r.addBroken(nil, "", &CompileError{ID: id, File: file, Err: &NameError{File: file, ID: id}})
			if err == nil {
				d.add(name, res)
			} else {
				d.failed[name] = err
			}
			continue
		}
		byID[id] = append(byID[id], name)
		if err != nil {
			r.addBroken(d, name, &CompileError{ID: id, File: file, Err: err})
			continue
		}
		d.add(name, res)
	}
	var names []string
	for id, files := range byID {
		if len(files) > 1 {
			sort.Strings(files)
			var full []string
			for _, f := range files {
				full = append(full, prefix+f)
			}
			for _, f := range files {
				// The files stay resources: a reference by file name is
				// not ambiguous. Only the id is.
				r.addBroken(d, "", &CompileError{ID: id, File: prefix + f, Err: &duplicateError{ID: id, Files: full}})
			}
			continue
		}
		if _, ok := d.files[files[0]]; ok {
			names = append(names, files[0])
		}
	}
	sort.Strings(names)
	for _, name := range names {
		id, _ := IDFromFile(name)
		s, err := d.compile(id, name)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) {
				ce = &CompileError{ID: id, Err: err}
			}
			ce.File = prefix + name
			for i := range ce.Findings {
				ce.Findings[i].File = ce.File
			}
			r.addBroken(nil, "", ce)
			continue
		}
		s.File = prefix + name
		r.schemas[id] = s
	}
	return r, nil
}

// readResource reads one schema file within the limits and parses it.
func readResource(fsys fs.FS, name, file string, cfg Config) (*resource, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("reading schema: %w", err)
	}
	if info.Size() > cfg.MaxFileBytes {
		return nil, &LimitError{File: file, Limit: "size", Max: cfg.MaxFileBytes, Size: info.Size()}
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading schema: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, cfg.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading schema: %w", err)
	}
	if int64(len(raw)) > cfg.MaxFileBytes { // it grew since the Stat
		return nil, &LimitError{File: file, Limit: "size", Max: cfg.MaxFileBytes, Size: int64(len(raw))}
	}
	return parseResource(raw, file, cfg)
}

// parseResource checks the depth of raw with a streaming token reader, then
// parses it and makes its canonical text. A leading UTF-8 byte order mark
// is dropped.
func parseResource(raw []byte, file string, cfg Config) (*resource, error) {
	// Windows editors save UTF-8 with a byte order mark; JSON parsers may
	// ignore it (RFC 8259, 8.1), and the version hashes the canonical text.
	raw = bytes.TrimPrefix(raw, []byte("\ufeff"))
	if int64(len(raw)) > cfg.MaxFileBytes {
		return nil, &LimitError{File: file, Limit: "size", Max: cfg.MaxFileBytes, Size: int64(len(raw))}
	}
	if err := checkDepth(raw, cfg.MaxDepth); err != nil {
		if errors.Is(err, errTooDeep) {
			return nil, &LimitError{File: file, Limit: "depth", Max: int64(cfg.MaxDepth)}
		}
		return nil, &parseError{err}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &parseError{err}
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("a schema must be a JSON object or boolean, got %s", jsonTypeName(doc))
	}
	canon, err := canonicalOf(doc)
	if err != nil {
		return nil, &parseError{err}
	}
	return &resource{doc: doc, canon: canon}, nil
}

var errTooDeep = errors.New("nested too deep")

// checkDepth reads raw token by token and stops at the first array or
// object nested deeper than max. It never builds the document, so a deep
// file costs what reading its first max levels costs. A syntax error is
// returned as it is.
func checkDepth(raw []byte, max int) error {
	dec := jsontext.NewDecoder(bytes.NewReader(raw),
		// What the full parse accepts, the depth check accepts too.
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if k := tok.Kind(); (k == '{' || k == '[') && dec.StackDepth() > max {
			return errTooDeep
		}
	}
}

// Get returns the schema with the given id.
func (r *Registry) Get(id string) (*Schema, bool) {
	s, ok := r.schemas[id]
	return s, ok
}

// IDs returns the ids of the schemas that loaded, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.schemas))
	for id := range r.schemas {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Broken returns the schema files that did not load, sorted by file, each
// with its id (as the file name gives it) and why.
func (r *Registry) Broken() []*CompileError {
	out := make([]*CompileError, 0, len(r.broken))
	for _, ce := range r.broken {
		out = append(out, ce)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// BrokenSchema returns why the schema with this id did not load, and false
// when it loaded or no file gives that id.
func (r *Registry) BrokenSchema(id string) (*CompileError, bool) {
	if _, ok := r.schemas[id]; ok {
		return nil, false
	}
	for _, ce := range r.Broken() {
		if ce.ID == id {
			return ce, true
		}
	}
	return nil, false
}

// Err joins the errors of the broken schema files; nil when every file
// loaded.
func (r *Registry) Err() error {
	var errs []error
	for _, ce := range r.Broken() {
		errs = append(errs, ce)
	}
	return errors.Join(errs...)
}

// addBroken records a file that did not load; when d is given, references
// to the file name report that error too.
func (r *Registry) addBroken(d *schemaDir, name string, ce *CompileError) {
	r.broken[ce.File] = ce
	if d != nil && name != "" {
		d.failed[name] = ce.Err
	}
}
