package schemas

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/job"
)

const addressSchema = `{"type":"object","required":["line"],"properties":{"line":{"type":"string","minLength":1}},
	"$defs":{"line":{"type":"string","minLength":3}}}`

// TestLoadReferences: references between files of the schema directory
// resolve (by file name, by $id, with a fragment, relative to a $id), and
// the validator (the fast path and the general one) follows them.
func TestLoadReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		valid   string
		invalid string
		want    string // the diagnostic of invalid
		uses    []string
		raw     string // Raw, when given
	}{
		{
			name: "by file name",
			files: map[string]string{
				"invoice.json": `{"type":"object","required":["addr"],"properties":{"addr":{"$ref":"address.json"}}}`,
				"address.json": addressSchema,
			},
			valid: `{"addr":{"line":"1 Main St"}}`, invalid: `{"addr":{}}`,
			want: "- /addr/line: missing required property, expected string of at least 1 character", uses: []string{"address.json"},
			raw: `{"$defs":{"address.json":{"$defs":{"line":{"minLength":3,"type":"string"}},"properties":{"line":{"minLength":1,"type":"string"}},"required":["line"],"type":"object"}},` +
				`"properties":{"addr":{"$ref":"#/$defs/address.json"}},"required":["addr"],"type":"object"}`,
		},
		{
			name: "by file name with a fragment",
			files: map[string]string{
				"invoice.json": `{"type":"object","properties":{"line":{"$ref":"address.json#/$defs/line"}}}`,
				"address.json": addressSchema,
			},
			valid: `{"line":"abc"}`, invalid: `{"line":"ab"}`,
			want: `- /line: expected string of at least 3 characters, got "ab"`, uses: []string{"address.json"},
		},
		{
			name: "by the other file's $id",
			files: map[string]string{
				"invoice.json": `{"type":"object","properties":{"addr":{"$ref":"https://schemas.example.com/common/address.json"}}}`,
				"address.json": `{"$id":"https://schemas.example.com/common/address.json",` + addressSchema[1:],
			},
			valid: `{"addr":{"line":"x"}}`, invalid: `{"addr":{"line":""}}`,
			want: `- /addr/line: expected string of at least 1 character, got ""`, uses: []string{"address.json"},
		},
		{
			name: "relative to the schema's own $id",
			files: map[string]string{
				"invoice.json": `{"$id":"https://schemas.example.com/invoice.json","type":"object","properties":{"addr":{"$ref":"address.json"}}}`,
				"address.json": `{"$id":"https://schemas.example.com/address.json",` + addressSchema[1:],
			},
			valid: `{"addr":{"line":"x"}}`, invalid: `{"addr":{"line":7}}`,
			want: `- /addr/line: expected string of at least 1 character, got 7`, uses: []string{"address.json"},
		},
		{
			name: "draft-07 definitions of another file",
			files: map[string]string{
				"order.json":  `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"qty":{"$ref":"common.json#/definitions/qty"}}}`,
				"common.json": `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"qty":{"type":"integer","minimum":1}}}`,
			},
			valid: `{"qty":2}`, invalid: `{"qty":0}`,
			want: "- /qty: expected integer >= 1, got 0", uses: []string{"common.json"},
		},
		{
			name: "a file whose name is not an id can still be referenced",
			files: map[string]string{
				"invoice.json":     `{"type":"object","properties":{"addr":{"$ref":"shared.defs.json"}}}`,
				"shared.defs.json": addressSchema,
			},
			valid: `{"addr":{"line":"x"}}`, invalid: `{"addr":{"line":""}}`,
			want: `- /addr/line: expected string of at least 1 character, got ""`, uses: []string{"shared.defs.json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := Load(writeFiles(t, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			id := r.IDs()[0]
			if id == "common" || id == "address" {
				id = r.IDs()[1]
			}
			s, ok := r.Get(id)
			if !ok {
				t.Fatalf("%s did not load: %v", id, r.Err())
			}
			if !slices.Equal(s.Uses, tt.uses) {
				t.Errorf("Uses = %v, want %v", s.Uses, tt.uses)
			}
			if s.fast == nil {
				t.Error("no fast path for a schema with a cross-file $ref")
			}
			if ds, _, err := s.Validate([]byte(tt.valid), 0); err != nil || len(ds) != 0 {
				t.Errorf("Validate(%s) = %v, %v; want valid", tt.valid, ds, err)
			}
			if !s.fast.Accept([]byte(tt.valid)) {
				t.Errorf("the fast path does not accept %s", tt.valid)
			}
			ds, omitted, err := s.Validate([]byte(tt.invalid), 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := Lines(ds, omitted); got != tt.want {
				t.Errorf("Validate(%s):\n%s\nwant\n%s", tt.invalid, got, tt.want)
			}
			// Raw, what models and providers receive, stands alone: the
			// referenced files are inlined and it compiles without the
			// directory, with the same verdicts.
			alone, err := Compile(id, s.Raw)
			if err != nil {
				t.Fatalf("Raw does not compile on its own: %v\n%s", err, s.Raw)
			}
			if ds, _, _ := alone.Validate([]byte(tt.valid), 0); len(ds) != 0 {
				t.Errorf("Raw alone rejects %s: %v", tt.valid, ds)
			}
			if ds, omitted, _ := alone.Validate([]byte(tt.invalid), 0); Lines(ds, omitted) != tt.want {
				t.Errorf("Raw alone on %s:\n%s\nwant\n%s", tt.invalid, Lines(ds, omitted), tt.want)
			}
			if tt.raw != "" && string(s.Raw) != tt.raw {
				t.Errorf("Raw =\n%s\nwant\n%s", s.Raw, tt.raw)
			}
		})
	}
}

// TestLoadVersionCoversReferencedFiles: a change to a file that a schema
// references, directly or through another file, is a new version of the
// schema; schemas that do not reference it keep theirs.
func TestLoadVersionCoversReferencedFiles(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"invoice.json": `{"type":"object","properties":{"addr":{"$ref":"address.json"}}}`,
		"address.json": `{"type":"object","properties":{"country":{"$ref":"country.json"}}}`,
		"country.json": `{"type":"string","minLength":2}`,
		"other.json":   `{"type":"object"}`,
	}
	load := func(files map[string]string) *Registry {
		t.Helper()
		r, err := Load(writeFiles(t, files))
		if err != nil || r.Err() != nil {
			t.Fatalf("Load: %v, %v", err, r.Err())
		}
		return r
	}
	version := func(r *Registry, id string) string {
		s, _ := r.Get(id)
		return s.Version
	}
	before := load(files)
	inv, _ := before.Get("invoice")
	if want := []string{"address.json", "country.json"}; !slices.Equal(inv.Uses, want) {
		t.Errorf("invoice Uses = %v, want %v", inv.Uses, want)
	}
	if again := load(files); version(again, "invoice") != version(before, "invoice") {
		t.Error("the same files in another directory give another version")
	}
	files["country.json"] = `{"type":"string","minLength":3}`
	after := load(files)
	for _, id := range []string{"invoice", "address", "country"} {
		if version(before, id) == version(after, id) {
			t.Errorf("%s keeps version %s after country.json changed", id, version(after, id))
		}
	}
	if version(before, "other") != version(after, "other") {
		t.Error("other.json references nothing and yet changed version")
	}
	if cv := mustCompile(t, "other", files["other.json"]).Version; cv != version(after, "other") {
		t.Errorf("a schema without references: version %s in a directory, %s compiled alone", version(after, "other"), cv)
	}
}

// TestLoadSchemaWithByteOrderMark: a schema file that starts with a UTF-8
// byte order mark (as Windows editors save UTF-8) loads, and so does a file
// it references, with the version the same files have without the mark.
func TestLoadSchemaWithByteOrderMark(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"invoice.json": `{"type":"object","properties":{"addr":{"$ref":"address.json"}},"required":["addr"]}`,
		"address.json": `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
	}
	plain, err := Load(writeFiles(t, files))
	if err != nil || plain.Err() != nil {
		t.Fatalf("Load: %v, %v", err, plain.Err())
	}
	for name, text := range files {
		files[name] = "\ufeff" + text
	}
	r, err := Load(writeFiles(t, files))
	if err != nil || r.Err() != nil {
		t.Fatalf("Load with byte order marks: %v, %v", err, r.Err())
	}
	inv, ok := r.Get("invoice")
	if !ok {
		t.Fatalf("invoice not loaded; ids %v", r.IDs())
	}
	if want, _ := plain.Get("invoice"); inv.Version != want.Version {
		t.Errorf("version %s with the mark, %s without", inv.Version, want.Version)
	}
	if d, _, err := inv.Validate([]byte(`{"addr":{}}`), 10); err != nil || len(d) != 1 || d[0].Path != "/addr/city" {
		t.Errorf("the referenced file's rule: diagnostics %+v (%v), want one at /addr/city", d, err)
	}
}

// TestLoadBroken: a file that cannot be a schema is reported with the file
// and the reason; the other files of the directory load.
func TestLoadBroken(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"items":`, 3000) + `{}` + strings.Repeat(`}`, 3000)
	tests := []struct {
		name   string
		files  map[string]string
		outer  map[string]string // files in the directory above
		cfg    Config
		broken string // the broken file
		want   []string
		check  func(t *testing.T, err error)
	}{
		{
			name:   "remote ref refused",
			files:  map[string]string{"invoice.json": `{"properties":{"a":{"$ref":"https://example.com/address.json"}}}`},
			broken: "invoice.json",
			want:   []string{"invoice.json", "#/properties/a/$ref", `"https://example.com/address.json"`, "remote references are not fetched"},
			check:  wantRefError,
		},
		{
			name:   "out of directory ref refused, though the file exists",
			files:  map[string]string{"invoice.json": `{"properties":{"a":{"$ref":"../x.json"}}}`},
			outer:  map[string]string{"x.json": `{"type":"string"}`},
			broken: "invoice.json",
			want:   []string{"invoice.json", `"../x.json"`, "outside the schema directory"},
			check:  wantRefError,
		},
		{
			name:   "absolute file ref refused",
			files:  map[string]string{"invoice.json": `{"properties":{"a":{"$ref":"file:///etc/passwd"}}}`},
			broken: "invoice.json",
			want:   []string{"invoice.json", `"file:///etc/passwd"`, "outside the schema directory"},
			check:  wantRefError,
		},
		{
			name:   "ref to a missing file",
			files:  map[string]string{"invoice.json": `{"$ref":"adress.json"}`},
			broken: "invoice.json",
			want:   []string{"invoice.json", `"adress.json"`, "no file adress.json"},
			check:  wantRefError,
		},
		{
			name: "ref from a referenced file names that file",
			files: map[string]string{
				"invoice.json": `{"$ref":"address.json"}`,
				"address.json": `{"properties":{"c":{"$ref":"https://example.com/c.json"}}}`,
			},
			broken: "invoice.json",
			want:   []string{"address.json at #/properties/c/$ref", `"https://example.com/c.json"`},
			check:  wantRefError,
		},
		{
			name: "ref to a broken file names its error",
			files: map[string]string{
				"invoice.json": `{"$ref":"address.json"}`,
				"address.json": `{"type":`,
			},
			broken: "invoice.json",
			want:   []string{"invoice.json", `"address.json"`, "address.json did not load", "parsing JSON"},
		},
		{
			name:   "over the size limit",
			files:  map[string]string{"big.json": `{"description":"` + strings.Repeat("x", 200) + `"}`},
			cfg:    Config{MaxFileBytes: 100},
			broken: "big.json",
			want:   []string{"big.json", "218 bytes", "size limit of 100 bytes"},
			check:  wantLimit("size"),
		},
		{
			name:   "3000 deep is refused by the default depth limit",
			files:  map[string]string{"deep.json": deep},
			broken: "deep.json",
			want:   []string{"deep.json", "depth limit of 128 levels"},
			check:  wantLimit("depth"),
		},
		{
			name:   "a configured depth limit",
			files:  map[string]string{"d.json": `{"properties":{"a":{"properties":{"b":{}}}}}`},
			cfg:    Config{MaxDepth: 4},
			broken: "d.json",
			want:   []string{"d.json", "depth limit of 4 levels"},
			check:  wantLimit("depth"),
		},
		{
			name:   "a control character in the file name",
			files:  map[string]string{"tab\there.json": `{}`},
			broken: "tab\there.json",
			want:   []string{`"tab\there.json"`, allowedIDChars},
			check:  wantNameError,
		},
		{
			name:   "a file name that is not UTF-8",
			files:  map[string]string{"caf\xe9.json": `{}`},
			broken: "caf\xe9.json",
			want:   []string{`"caf\xe9.json"`, allowedIDChars},
			check:  wantNameError,
		},
		{
			name:   "a bidirectional override in the file name",
			files:  map[string]string{"invoice\u202egpj.json": `{}`},
			broken: "invoice\u202egpj.json",
			want:   []string{`"invoice\u202egpj.json"`, allowedIDChars},
			check:  wantNameError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			outer := t.TempDir()
			for name, body := range tt.outer {
				if err := os.WriteFile(filepath.Join(outer, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(outer, "schemas")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tt.files["good.json"] = `{"type":"object"}`
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r, err := LoadWith(dir, tt.cfg)
			if err != nil {
				t.Fatalf("LoadWith: %v", err)
			}
			if _, ok := r.Get("good"); !ok {
				t.Errorf("good.json did not load beside a broken file: %v", r.Err())
			}
			var ce *CompileError
			for _, b := range r.Broken() {
				if b.File == filepath.Join(dir, tt.broken) {
					ce = b
				}
			}
			if ce == nil {
				t.Fatalf("%s not in Broken(): %v", tt.broken, r.Err())
			}
			if id, _ := IDFromFile(tt.broken); ValidID(id) {
				if got, ok := r.BrokenSchema(id); !ok || got != ce {
					t.Errorf("BrokenSchema(%q) = %v, %v", id, got, ok)
				}
				if _, ok := r.Get(id); ok {
					t.Errorf("Get(%q) finds a broken schema", id)
				}
			}
			for _, s := range tt.want {
				if !strings.Contains(ce.Error(), s) {
					t.Errorf("error %q does not mention %q", ce, s)
				}
			}
			if tt.check != nil {
				tt.check(t, ce)
			}
			if !errors.Is(r.Err(), ce) {
				t.Errorf("Registry.Err() = %v, does not hold %v", r.Err(), ce)
			}
		})
	}
}

func wantRefError(t *testing.T, err error) {
	t.Helper()
	var re *RefError
	if !errors.As(err, &re) || re.File == "" || re.Ref == "" {
		t.Errorf("error %v: want a *RefError naming the file and the ref, got %#v", err, re)
	}
}

func wantLimit(limit string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != limit {
			t.Errorf("error %v: want a *LimitError for %s", err, limit)
		}
	}
}

func wantNameError(t *testing.T, err error) {
	t.Helper()
	var ne *NameError
	if !errors.As(err, &ne) {
		t.Errorf("error %v: want a *NameError", err)
	}
}

func TestLoadWithRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := LoadWith(t.TempDir(), Config{MaxDepth: -1}); err == nil {
		t.Error("LoadWith(MaxDepth -1): want error")
	}
}

// TestValidIDAgreesWithJobs: a file name ValidID accepts gives a schema id
// that jobs can name, and the reverse.
func TestValidIDAgreesWithJobs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"invoice", "a_b-c:d~e@f+g=h", "my schema", "a.b", "façade", "", strings.Repeat("x", 255),
		strings.Repeat("x", 256), "a/b", "a*", "a>", ".", "..", " lead", "tab\t", "caf\xe9", "\u202e", "a\u200bb", "\ufffd", "a\u00a0b"} {
		line, err := json.Marshal(map[string]string{"id": "j1", "schema": id, "input": "x"})
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(id) {
			// json.Marshal writes invalid UTF-8 as U+FFFD; a job's bytes can hold it.
			line = []byte(`{"id":"j1","schema":"` + id + `","input":"x"}`)
		}
		_, err = job.Parse(line)
		if got, want := ValidID(id), err == nil; got != want {
			t.Errorf("ValidID(%q) = %v, but a job naming it parses: %v (%v)", id, got, want, err)
		}
		if got, want := ValidID(id), job.ValidSchemaID(id); got != want {
			t.Errorf("ValidID(%q) = %v, job.ValidSchemaID = %v", id, got, want)
		}
	}
}

// TestLoadSchemaStoreNames: the names schema files have in the SchemaStore
// catalogue and on Windows give their ids: the file name without .json or
// .schema.json, dots, spaces and any printable UTF-8 kept.
func TestLoadSchemaStoreNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := map[string]string{
		"foo-1.0.0.json":        "foo-1.0.0",
		"ticket.v2.schema.json": "ticket.v2",
		"My Invoice.json":       "My Invoice",
		"façade_ü.json":         "façade_ü",
		"請求書.schema.json":       "請求書",
		"..json":                ".",
		"a%2Eb.json":            "a%2Eb",
		"ref to v2.json":        "ref to v2",
		"package.manifest.json": "package.manifest",
	}
	for name := range want {
		body := `{"type":"object"}`
		if name == "ref to v2.json" {
			body = `{"$ref":"ticket.v2.schema.json"}`
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("a file did not load: %v", err)
	}
	for name, id := range want {
		if _, ok := r.Get(id); !ok {
			t.Errorf("%s: schema %q not loaded (ids: %q)", name, id, r.IDs())
		}
	}
	if got := len(r.IDs()); got != len(want) {
		t.Errorf("%d schemas, want %d: %q", got, len(want), r.IDs())
	}
}

// BenchmarkLoadRefusesDeep: a 3000-deep schema (112 KB) is refused by the
// depth check, before any parse or compile.
func BenchmarkLoadRefusesDeep(b *testing.B) {
	dir := b.TempDir()
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 3000) + `{}` + strings.Repeat(`}}`, 3000)
	if err := os.WriteFile(filepath.Join(dir, "deep.json"), []byte(deep), 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := Load(dir)
		if err != nil || len(r.Broken()) != 1 {
			b.Fatalf("Load: %v, broken %v", err, r.Broken())
		}
	}
}
