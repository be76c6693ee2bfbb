package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/eval"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
)

func (e *env) evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "score the stored results against labelled data: precision, recall and f1 per field path",
		Description: `--expected FILE is JSON Lines, {"id": JOB_ID, "expected": OBJECT} per line. Each id is joined
with its job's latest run in the index; a dead letter or an id with no run counts every expected
value as missing. Prints one row per field path (correct, wrong, missing, extra, precision, recall,
f1) and the overall line; --json prints one object. The eval is stored in the index (--history
lists the stored ones; --no-save leaves it out). The scoring rules: docs/eval.md.
Exit codes: 0 scored; 1 the overall f1 is below --min-f1; 2 a bad flag, a labelled file that cannot
be read, or a line of it that is not a label (FILE:LINE, nothing scored); 3 no index, or it cannot
be read or written.`,
		ArgsUsage: " ",
		Flags:     flags(config.EvalFlags(), config.StoreFlags(), []cli.Flag{jsonFlag()}, config.LogFlags()),
		Action: func(c *cli.Context) error {
			cfg := conf(c)
			ev := cfg.Eval
			if ev.History {
				return e.evalHistory(c, cfg)
			}
			if ev.Expected == "" {
				return fail(exitUsage, "eval needs --expected FILE (or --history)")
			}
			if ev.MinF1 < 0 || ev.MinF1 > 1 {
				return fail(exitUsage, "--min-f1 %v: want a number from 0 to 1", ev.MinF1)
			}
			opt := eval.Options{Schema: cfg.Filter.Schema, By: ev.By, ShowErrors: ev.ShowErrors}
			if ev.By != "" && ev.By != eval.ByModel && ev.By != eval.ByVersion {
				return fail(exitUsage, "--by %q: want model or version", ev.By)
			}
			if ev.ShowErrors < 0 {
				return fail(exitUsage, "--show-errors %d: want 0 or more", ev.ShowErrors)
			}
			st, err := app.OpenStore(cfg, false)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := eval.Run(c.Context, st, ev.Expected, opt)
			var le *eval.LineError
			if errors.As(err, &le) || errors.Is(err, eval.ErrFile) {
				return withCode(exitUsage, err)
			}
			if err != nil {
				return withCode(exitRuntime, err)
			}
			if !ev.NoSave && len(res.Groups) > 0 {
				if _, err := st.SaveEval(c.Context, res.Stored()); err != nil {
					return withCode(exitRuntime, err)
				}
			}
			if cfg.Output.JSON {
				err = jsonEncoder(e.stdout).Encode(res)
			} else {
				err = eval.WriteTable(e.stdout, res)
			}
			if err != nil {
				return withCode(exitRuntime, err)
			}
			if ev.MinF1 > 0 && res.Overall.F1 < ev.MinF1 {
				return fail(exitNegative, "overall f1 %.4f is below --min-f1 %v", res.Overall.F1, ev.MinF1)
			}
			return nil
		},
	}
}

func (e *env) evalHistory(c *cli.Context, cfg *config.Config) error {
	st, err := app.OpenStore(cfg, false)
	if err != nil {
		return err
	}
	defer st.Close()
	evals, err := st.Evals(c.Context, cfg.Filter.Schema)
	if err != nil {
		return withCode(exitRuntime, err)
	}
	if !cfg.Output.JSON {
		return withCode(exitRuntime, eval.WriteHistory(e.stdout, evals))
	}
	enc := jsonEncoder(e.stdout)
	for _, h := range eval.History(evals) {
		if err := enc.Encode(h); err != nil {
			return withCode(exitRuntime, fmt.Errorf("writing the history: %w", err))
		}
	}
	return nil
}
