// Package config is pipeline's one configuration: a YAML file (--config
// FILE or $PIPELINE_CONFIG), environment variables and flags, resolved in
// that order of precedence under the defaults (flags win), into the typed,
// sectioned Config that commands read, with the source of every setting.
//
// The file's keys are the long flag names: settings for every command at
// the top level, a command's own under its name (a subcommand's under its
// group's), the innermost winning:
//
//	data-dir: /var/lib/pipeline
//	schemas: ./schemas
//	run:
//	  model: openai:gpt-4o-mini
//	  max-attempts: 3
//	dlq:
//	  list:
//	    json: true
//
// A key that no command below it has, or a value of the wrong type, is an
// error naming FILE:LINE and the key.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"
)

// Env is the environment variable that names the configuration file when
// --config is not given.
const Env = "PIPELINE_CONFIG"

// File is a loaded configuration file.
type File struct {
	// Path is the file's name as given.
	Path string
	root *yaml.Node // the top-level mapping (nil: an empty file)
}

// Value is one setting of the file: its items (one for a scalar, each
// element of a sequence), and where it was written.
type Value struct {
	Key   string
	Items []string
	Line  int
}

// Error is a mistake in the file, at a line: an unknown key, a value of
// the wrong type, a malformed document.
type Error struct {
	Path string
	Line int
	Msg  string
}

// Error is "FILE:LINE: message".
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Load reads and parses the configuration file at path. The document must
// be a mapping (or empty).
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("configuration file: %w", err)
	}
	return Parse(path, b)
}

// Parse parses b as the configuration file named path.
func Parse(path string, b []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			return nil, &Error{Path: path, Msg: te.Errors[0]}
		}
		return nil, &Error{Path: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	f := &File{Path: path}
	if len(doc.Content) == 0 {
		return f, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return f, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Path: path, Line: root.Line, Msg: "want a mapping of settings (key: value), one section per command"}
	}
	f.root = root
	return f, nil
}

// Lookup returns the setting name for the command at path (["run"],
// ["dlq", "list"]): the innermost section that has it wins over its
// enclosing ones and the top level.
func (f *File) Lookup(path []string, name string) (Value, bool) {
	if f == nil || f.root == nil {
		return Value{}, false
	}
	var found Value
	ok := false
	node := f.root
	for depth := 0; node != nil; depth++ {
		if v, has := settingIn(node, name); has {
			found, ok = v, true
		}
		if depth == len(path) {
			break
		}
		node = sectionIn(node, path[depth])
	}
	return found, ok
}

// settingIn is the setting name of a mapping, if it has one that is not a
// section.
func settingIn(m *yaml.Node, name string) (Value, bool) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value != name || v.Kind == yaml.MappingNode {
			continue
		}
		val := Value{Key: name, Line: k.Line}
		switch v.Kind {
		case yaml.SequenceNode:
			for _, it := range v.Content {
				val.Items = append(val.Items, it.Value)
			}
		default:
			val.Items = []string{v.Value}
		}
		return val, true
	}
	return Value{}, false
}

// sectionIn is the section (a mapping) name of m, or nil.
func sectionIn(m *yaml.Node, name string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k, v := m.Content[i], m.Content[i+1]; k.Value == name && v.Kind == yaml.MappingNode {
			return v
		}
	}
	return nil
}

// Node is what Check checks a section against: a command (or the whole
// program), its own settings, and its subcommands.
type Node interface {
	// Name is the command's name ("" for the program).
	Name() string
	// Check reports whether name is a setting of this command or of one
	// below it, and checks one value of it (an error for a wrong type).
	Check(name, value string) (known bool, err error)
	// Sub is the subcommand of that name, or nil.
	Sub(name string) Node
	// Names lists what a key in this command's section may be: its
	// settings, its subcommands and theirs.
	Names() []string
}

// Check refuses a file with a key that no command under its section knows
// of, a value of the wrong type, or a key written twice.
func (f *File) Check(root Node) error {
	if f == nil || f.root == nil {
		return nil
	}
	return f.check(f.root, root, nil)
}

func (f *File) check(m *yaml.Node, n Node, path []string) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		where := strings.Join(append(append([]string{}, path...), k.Value), ".")
		if k.Kind != yaml.ScalarNode {
			return &Error{Path: f.Path, Line: k.Line, Msg: "a key must be a setting or a command name"}
		}
		if first, dup := seen[k.Value]; dup {
			return &Error{Path: f.Path, Line: k.Line, Msg: fmt.Sprintf("key %q written twice (first on line %d)", where, first)}
		}
		seen[k.Value] = k.Line
		if v.Kind == yaml.MappingNode {
			sub := n.Sub(k.Value)
			if sub == nil {
				return &Error{Path: f.Path, Line: k.Line, Msg: fmt.Sprintf("unknown key %q: %s%s", where, noCommand(path, k.Value), didYouMean(k.Value, n.Names()))}
			}
			if err := f.check(v, sub, append(path, k.Value)); err != nil {
				return err
			}
			continue
		}
		var items []*yaml.Node
		switch v.Kind {
		case yaml.SequenceNode:
			items = v.Content
		case yaml.ScalarNode:
			items = []*yaml.Node{v}
		default:
			return &Error{Path: f.Path, Line: k.Line, Msg: fmt.Sprintf("key %q: want a value or a list of values", where)}
		}
		known, _ := n.Check(k.Value, "")
		if !known {
			return &Error{Path: f.Path, Line: k.Line, Msg: fmt.Sprintf("unknown key %q: %s%s", where, noSetting(path), didYouMean(k.Value, n.Names()))}
		}
		for _, it := range items {
			if it.Kind != yaml.ScalarNode {
				return &Error{Path: f.Path, Line: it.Line, Msg: fmt.Sprintf("key %q: want a value or a list of values", where)}
			}
			if _, err := n.Check(k.Value, it.Value); err != nil {
				return &Error{Path: f.Path, Line: it.Line, Msg: fmt.Sprintf("key %q: %v", where, err)}
			}
		}
	}
	return nil
}

func noSetting(path []string) string {
	if len(path) == 0 {
		return "no command has this setting (keys are the long flag names)"
	}
	return fmt.Sprintf("'pipeline %s' has no such setting (keys are the long flag names)", strings.Join(path, " "))
}

func noCommand(path []string, name string) string {
	return fmt.Sprintf("no command %s (a section is a command's name, holding its settings)", strconv.Quote(strings.TrimSpace(strings.Join(append(append([]string{}, path...), name), " "))))
}

// didYouMean is "; did you mean "NAME"?" for the known name nearest to key
// (at most two edits, and fewer than half of key's length), or "".
func didYouMean(key string, names []string) string {
	best, dist := "", 3
	for _, name := range names {
		if d := levenshtein.ComputeDistance(key, name); d < dist && 2*d < len(key) {
			best, dist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}
