package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/secret"
)

// configCommand is `pipeline config show`: the settings a command would
// run with, and where each came from.
func (e *env) configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the settings in effect (flags > environment variables > --config FILE > defaults)",
		Subcommands: []*cli.Command{{
			Name:      "show",
			Usage:     "print every setting of a command in effect and where it came from (env NAME, file FILE:LINE, default)",
			ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "command", Value: "run", Usage: "the command whose settings to show, e.g. run, submit, 'dlq list'"},
				jsonFlag(),
			},
			Action: e.configShow,
		}},
	}
}

func (e *env) configShow(c *cli.Context) error {
	if c.NArg() > 0 {
		return fail(exitUsage, "config show takes no arguments, got %q (use --command NAME)", c.Args().First())
	}
	// A fresh program: its flags hold only their defaults.
	app := newApp(e.stdin, e.stdout, e.stderr)
	path := strings.Fields(conf(c).Tools.Command)
	cmd := findCommand(app.Commands, path)
	if cmd == nil || cmd.Action == nil || len(cmd.Subcommands) > 0 {
		return fail(exitUsage, "--command %q: no such command (see 'pipeline --help')", conf(c).Tools.Command)
	}
	f, err := config.FileOf(c)
	if err != nil {
		return withCode(exitUsage, err)
	}
	settings, err := config.Show(cmd, path, f, nil)
	if err != nil {
		return withCode(exitUsage, err)
	}
	red := showRedactor(settings)
	for i := range settings {
		if settings[i].Name == config.FlagName && f != nil {
			// The file shown is the one this command read.
			src := config.Source{Kind: "flag"}
			if !c.IsSet(config.FlagName) || os.Getenv(config.Env) == f.Path {
				src = config.Source{Kind: "env", Env: config.Env}
			}
			settings[i].Value, settings[i].Source, settings[i].From = f.Path, src, src.String()
		}
		settings[i].Value = red.String(settings[i].Value)
	}
	if conf(c).Output.JSON {
		enc := jsonEncoder(e.stdout)
		for _, s := range settings {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE")
	for _, s := range settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Value, s.From)
	}
	return tw.Flush()
}

// showRedactor knows the secrets settings hold (as app.LearnSecrets does for a
// running command): the console's token, header values, URLs' user info.
func showRedactor(settings []config.Setting) *secret.Redactor {
	red := secret.New()
	for _, k := range app.SecretEnv() {
		red.Add(os.Getenv(k))
	}
	for _, s := range settings {
		switch s.Name {
		case "ui-token":
			red.Add(s.Value)
		case "llm-header":
			for _, h := range strings.Split(s.Value, ",") {
				if _, v, ok := strings.Cut(h, ":"); ok {
					red.Add(strings.TrimSpace(v))
				}
			}
		case "llm-url", "nats-url":
			red.AddURL(s.Value)
		}
	}
	return red
}

// findCommand is the command at path ("dlq", "list"), or nil.
func findCommand(cmds []*cli.Command, path []string) *cli.Command {
	var found *cli.Command
	for _, n := range path {
		found = nil
		for _, cmd := range cmds {
			if cmd.HasName(n) && cmd.Name != "help" {
				found = cmd
			}
		}
		if found == nil {
			return nil
		}
		cmds = found.Subcommands
	}
	return found
}
