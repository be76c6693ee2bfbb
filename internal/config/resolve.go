package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagName is the flag of every command that names the configuration file.
const FlagName = "config"

// ConfigFlag is --config FILE (or $PIPELINE_CONFIG). Each command gets
// its own (urfave/cli flags hold their value).
func ConfigFlag() cli.Flag {
	return &cli.StringFlag{Name: FlagName, EnvVars: []string{Env}, TakesFile: true,
		Usage: "YAML file of settings: keys are the long flag names, at the top level for every command, under a command's name for its own; flags win over environment variables, which win over the file ('pipeline config show' lists each setting and where it came from)"}
}

// Source is where a setting in effect came from.
type Source struct {
	// Kind is "flag", "env", "file" or "default".
	Kind string
	// Env is the variable's name (Kind "env").
	Env string
	// File and Line are the setting's place (Kind "file").
	File string
	Line int
}

// String is the source as config show prints it: flag, env NAME,
// file FILE:LINE or default.
func (s Source) String() string {
	switch s.Kind {
	case "env":
		return "env " + s.Env
	case "file":
		return fmt.Sprintf("file %s:%d", s.File, s.Line)
	}
	return s.Kind
}

// Setting is one flag's value in effect and its source.
type Setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source Source `json:"-"`
	// From is Source as text, for JSON.
	From string `json:"source"`
}

// Tree is the program's commands as the file's sections: the check of a
// file against what the commands have.
func Tree(app *cli.App) Node {
	return cmdNode{name: "", subs: app.Commands}
}

type cmdNode struct {
	name  string
	flags []cli.Flag
	subs  []*cli.Command
}

func nodeOf(c *cli.Command) cmdNode {
	return cmdNode{name: c.Name, flags: c.Flags, subs: c.Subcommands}
}

func (n cmdNode) Name() string { return n.name }

func (n cmdNode) Sub(name string) Node {
	for _, c := range n.subs {
		if c.Name == name && c.Name != "help" {
			return nodeOf(c)
		}
	}
	return nil
}

// Check finds the setting in this command's flags or, for a group, in any
// of its commands', and checks the value against the first flag found.
func (n cmdNode) Check(name, value string) (bool, error) {
	f := n.find(name)
	if f == nil {
		return false, nil
	}
	return true, checkValue(f, name, value)
}

// Names lists the settings of this command and of the commands below it,
// and the names of those commands: what a key under its section may be.
func (n cmdNode) Names() []string {
	var names []string
	for _, f := range n.flags {
		if name := f.Names()[0]; name != FlagName && name != "help" {
			names = append(names, name)
		}
	}
	for _, c := range n.subs {
		if c.Name == "help" {
			continue
		}
		names = append(names, c.Name)
		names = append(names, nodeOf(c).Names()...)
	}
	return names
}

func (n cmdNode) find(name string) cli.Flag {
	if name == FlagName || name == "help" {
		return nil
	}
	for _, f := range n.flags {
		if f.Names()[0] == name {
			return f
		}
	}
	for _, c := range n.subs {
		if c.Name == "help" {
			continue
		}
		if f := nodeOf(c).find(name); f != nil {
			return f
		}
	}
	return nil
}

// checkValue parses value as flag f would, on a scratch flag set.
func checkValue(f cli.Flag, name, value string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := f.Apply(fs); err != nil {
		return err
	}
	if err := fs.Set(name, value); err != nil {
		return fmt.Errorf("invalid value %q: %v", value, unwrapParse(err))
	}
	return nil
}

func unwrapParse(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// Path is the command's place under the program: ["run"], ["dlq", "list"].
func Path(c *cli.Context) []string {
	var path []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" {
			path = append([]string{l.Command.Name}, path...)
		}
	}
	// The lineage ends at the app's own context, whose Command is the
	// app's root command, named after the program.
	if len(path) > 0 && c.App != nil && path[0] == c.App.Name {
		path = path[1:]
	}
	return path
}

// FileOf loads the command's configuration file: --config, else
// $PIPELINE_CONFIG (the flag reads it); nil without either. The file is
// checked against every command of app.
func FileOf(c *cli.Context) (*File, error) {
	path := c.String(FlagName)
	if path == "" {
		return nil, nil
	}
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	if err := f.Check(Tree(c.App)); err != nil {
		return nil, err
	}
	return f, nil
}

// Apply sets, on the running command c, every flag that neither its
// command line nor its environment variables set from the file f. A
// value the file sets makes the flag IsSet, as a flag would.
func Apply(c *cli.Context, f *File) error {
	if f == nil {
		return nil
	}
	path := Path(c)
	for _, fl := range c.Command.Flags {
		name := fl.Names()[0]
		if name == FlagName || c.IsSet(name) {
			continue
		}
		v, ok := f.Lookup(path, name)
		if !ok {
			continue
		}
		for _, it := range v.Items {
			if err := c.Set(name, it); err != nil {
				return &Error{Path: f.Path, Line: v.Line, Msg: fmt.Sprintf("key %q: invalid value %q: %v", name, it, unwrapParse(err))}
			}
		}
	}
	return nil
}

// Show resolves every setting of cmd (at path) as a run of it would,
// without a command line: its environment variables, else the file f,
// else its default; args are flags of cmd given to take effect too.
func Show(cmd *cli.Command, path []string, f *File, args []string) ([]Setting, error) {
	fs := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, fl := range cmd.Flags {
		if err := fl.Apply(fs); err != nil {
			return nil, err
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("flags of %s: %w", strings.Join(path, " "), err)
	}
	onLine := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { onLine[fl.Name] = true })
	var out []Setting
	for _, fl := range cmd.Flags {
		names := fl.Names()
		name := names[0]
		if name == "help" {
			continue
		}
		src := Source{Kind: "default"}
		lined := false
		for _, n := range names {
			lined = lined || onLine[n]
		}
		switch envName, fromEnv := envOf(fl); {
		case lined:
			src = Source{Kind: "flag"}
		case fromEnv:
			src = Source{Kind: "env", Env: envName}
		case name != FlagName:
			if v, ok := f.Lookup(path, name); ok {
				for _, it := range v.Items {
					if err := fs.Set(name, it); err != nil {
						return nil, &Error{Path: f.Path, Line: v.Line, Msg: fmt.Sprintf("key %q: invalid value %q: %v", name, it, unwrapParse(err))}
					}
				}
				src = Source{Kind: "file", File: f.Path, Line: v.Line}
			}
		}
		out = append(out, Setting{Name: name, Value: valueText(fs.Lookup(name)), Source: src, From: src.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// envOf is the first of the flag's environment variables that is set.
func envOf(fl cli.Flag) (string, bool) {
	d, ok := fl.(cli.DocGenerationFlag)
	if !ok {
		return "", false
	}
	for _, n := range d.GetEnvVars() {
		if _, set := os.LookupEnv(n); set {
			return n, true
		}
	}
	return "", false
}

// valueText is a flag's value as the file would write it (a list
// comma-separated).
func valueText(fl *flag.Flag) string {
	if fl == nil {
		return ""
	}
	if l, ok := fl.Value.(interface{ Value() []string }); ok {
		return strings.Join(l.Value(), ",")
	}
	return fl.Value.String()
}
