package config

import "github.com/urfave/cli/v2"

// Eval is what `pipeline eval` scores and how it gates.
type Eval struct {
	Expected   string  `flag:"expected"`
	By         string  `flag:"by"`
	MinF1      float64 `flag:"min-f1"`
	ShowErrors int     `flag:"show-errors"`
	History    bool    `flag:"history"`
	NoSave     bool    `flag:"no-save"`
}

// EvalFlags are the flags of `pipeline eval` (Eval, and Filter's --schema).
func EvalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "expected", Usage: `labelled file, JSON Lines: {"id": JOB_ID, "expected": OBJECT} per line; each id is scored against its job's latest run in the index`},
		&cli.StringFlag{Name: "schema", Usage: "only the labelled jobs whose latest run is of this schema (ids with no run at all still count, as no result); with --history, only this schema's evals"},
		&cli.StringFlag{Name: "by", Usage: "also score per model (of the final answer) or per schema version: model or version"},
		&cli.Float64Flag{Name: "min-f1", Usage: "exit 1 when the overall f1 is below this (0 to 1), after printing: a release gate for CI (0: no gate)"},
		&cli.IntFlag{Name: "show-errors", Usage: "list up to this many wrong and missing values: job id, path, expected, produced"},
		&cli.BoolFlag{Name: "history", Usage: "list the stored evals (per eval and schema version) instead of scoring"},
		&cli.BoolFlag{Name: "no-save", Usage: "score without storing the eval in the index's history"},
	}
}
