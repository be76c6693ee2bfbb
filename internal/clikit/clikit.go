// Package clikit wraps the commands of the CLI (urfave/cli) with what
// every one of them shares: its help command, the help of a command
// group given no subcommand, the refusal of a flag after an argument, the
// configuration file (--config), one-line usage errors, and the failure of
// a command whose NATS connection was lost.
package clikit

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
)

// Wrap wraps every command of cmds (and their subcommands): a group of
// subcommands without an action of its own shows its help on stderr (exit
// 2), flag errors are one line (exit 2), a flag after an argument is
// refused, the configuration file applies, and a lost NATS connection
// (w) fails the command.
func Wrap(cmds []*cli.Command, w *app.Watch, stdout, stderr io.Writer) {
	for _, cmd := range cmds {
		if len(cmd.Subcommands) > 0 && cmd.Action == nil {
			cmd.Action = func(c *cli.Context) error { return groupAction(c, stdout, stderr) }
		}
	}
	setUsageErrors(cmds)
	refuseLateFlags(cmds)
	applyConfig(cmds)
	watchConns(w, cmds)
}

// watchConns wraps every command's action: its context is cancelled when a
// NATS connection it opened is lost (broker.Conn.Lost), and then the
// command fails with that reason, whatever the action returned (a run
// stopped by its context would otherwise exit 0 for work it did not do).
func watchConns(w *app.Watch, cmds []*cli.Command) {
	for _, cmd := range cmds {
		watchConns(w, cmd.Subcommands)
		action := cmd.Action
		if action == nil {
			continue
		}
		cmd.Action = func(c *cli.Context) error {
			ctx, cancel := context.WithCancelCause(c.Context)
			defer cancel(nil)
			c.Context = ctx
			w.Start(cancel)
			err := action(c)
			if lost := w.Lost(); lost != nil {
				return exit.WithCode(exit.Runtime, fmt.Errorf("connection to NATS lost: %w", lost))
			}
			return err
		}
	}
}

// HelpCommand is `pipeline help [COMMAND [SUBCOMMAND]]`: the same text as
// `pipeline COMMAND --help`; a name that is no command exits 2.
func HelpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Aliases:   []string{"h"},
		Usage:     "show the commands, or one command's help and flags",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Action: func(c *cli.Context) error {
			names := c.Args().Slice()
			if len(names) == 0 {
				return Help(func() error { return cli.ShowAppHelp(c) })
			}
			cmds := c.App.Commands
			for _, n := range names {
				var found *cli.Command
				for _, cmd := range cmds {
					if cmd.HasName(n) && cmd.Name != "help" {
						found = cmd
					}
				}
				if found == nil {
					return exit.Fail(exit.Usage, "unknown command %q (see 'pipeline --help')", strings.Join(names, " "))
				}
				cmds = found.Subcommands
			}
			return Run(c.Context, c.App, append(append([]string{c.App.Name}, names...), "--help"))
		},
	}
}

// groupAction runs for a command of subcommands (dlq, schemas) given no
// subcommand, or one it does not have: its help on stderr, exit 2.
func groupAction(c *cli.Context, stdout, stderr io.Writer) error {
	if c.NArg() > 0 {
		return exit.Fail(exit.Usage, "unknown command %q (see '%s --help')", c.Command.Name+" "+c.Args().First(), c.Command.HelpName)
	}
	c.App.Writer = stderr
	defer func() { c.App.Writer = stdout }()
	if err := Help(func() error { return cli.ShowSubcommandHelp(c) }); err != nil {
		return err
	}
	return exit.Fail(exit.Usage, "%s needs a subcommand", c.Command.HelpName)
}

// refuseLateFlags wraps every command's action: urfave/cli stops reading
// flags at the first argument, so a flag after it (`schemas lint DIR
// --json`) would be taken for an argument. It is refused, saying to put
// flags first, instead of being silently ignored or misread.
func refuseLateFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		refuseLateFlags(cmd.Subcommands)
		action := cmd.Action
		if action == nil {
			continue
		}
		cmd.Action = func(c *cli.Context) error {
			args := c.Args().Slice()
			for i, a := range args {
				if i > 0 && strings.HasPrefix(a, "-") && a != "-" {
					return exit.Fail(exit.Usage, "flag %s after the argument %q: put flags before arguments (%s [flags] %s)",
						a, args[0], c.Command.HelpName, strings.TrimSpace(c.Command.ArgsUsage))
				}
			}
			return action(c)
		}
	}
}

// applyConfig gives every command --config FILE ($PIPELINE_CONFIG) and
// wraps its action: the file is checked against every command (an unknown
// key or a wrong value is a usage error naming FILE:LINE), and its values
// set the flags that neither the command line nor the environment set.
func applyConfig(cmds []*cli.Command) {
	for _, cmd := range cmds {
		applyConfig(cmd.Subcommands)
		action := cmd.Action
		if action == nil || cmd.Name == "help" || len(cmd.Subcommands) > 0 {
			continue
		}
		cmd.Flags = append(cmd.Flags, config.ConfigFlag())
		cmd.Action = func(c *cli.Context) error {
			f, err := config.FileOf(c)
			if err == nil {
				err = config.Apply(c, f)
			}
			if err != nil {
				return exit.WithCode(exit.Usage, err)
			}
			return action(c)
		}
	}
}

// usageError turns urfave/cli's flag errors into a one-line error with exit
// code 2, instead of the whole help text on stdout.
func usageError(c *cli.Context, err error, _ bool) error {
	return &exit.Error{Code: exit.Usage, Err: fmt.Errorf("%w (see '%s --help')", err, c.Command.HelpName)}
}

func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		setUsageErrors(c.Subcommands)
	}
}

// setup serializes urfave/cli's setup and flag parsing across the runs of
// one process: they write to its package-level --help flag and help
// command. A process runs one command; the tests run many at once, and
// the help command runs the app again from its action.
var setup sync.Mutex

// Run runs app with args (app.RunContext), holding setup until a
// command's action starts. Every run of an app goes through it, the help
// command's included.
func Run(ctx context.Context, app *cli.App, args []string) error {
	setup.Lock()
	var once sync.Once
	unlock := func() { once.Do(setup.Unlock) }
	defer unlock()
	app.Action = unlockFirst(app.Action, unlock)
	var wrap func(cmds []*cli.Command)
	wrap = func(cmds []*cli.Command) {
		for _, c := range cmds {
			c.Action = unlockFirst(c.Action, unlock)
			wrap(c.Subcommands)
		}
	}
	wrap(app.Commands)
	return app.RunContext(ctx, args)
}

func unlockFirst(action cli.ActionFunc, unlock func()) cli.ActionFunc {
	if action == nil {
		return nil
	}
	return func(c *cli.Context) error {
		unlock()
		return action(c)
	}
}

// Help prints a help text (show) holding setup: the text reads the flags
// that another run's parsing writes. It is for the actions that print
// help themselves; --help is printed during parsing, under Run's hold.
func Help(show func() error) error {
	setup.Lock()
	defer setup.Unlock()
	return show()
}
