package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// testApp is a program of two commands, run and dlq list, whose actions
// hand back their resolved Config.
func testApp(got **Config) *cli.App {
	action := func(c *cli.Context) error {
		f, err := FileOf(c)
		if err == nil {
			err = Apply(c, f)
		}
		if err != nil {
			return err
		}
		*got = FromContext(c)
		return nil
	}
	run := &cli.Command{Name: "run", Action: action, Flags: Flags(BrokerFlags(), StreamLimitFlags(), WorkerFlags(), BudgetFlags(),
		ModelFlags(), CostFlags(), []cli.Flag{SchemasFlag()}, SchemaLimitFlags(), ConsoleFlags(), BatchFlags(), LogFlags(), []cli.Flag{ConfigFlag()})}
	list := &cli.Command{Name: "list", Action: action, Flags: Flags(StoreFlags(), FilterFlags(), []cli.Flag{ConfigFlag()})}
	return &cli.App{Name: "pipeline", Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{},
		Commands: []*cli.Command{run, {Name: "dlq", Subcommands: []*cli.Command{list}}}}
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	p := write(t, `data-dir: /from/file
concurrency: 9
run:
  concurrency: 4
  max-attempts: 3
  fallback-model: [openai:a, openai:b]
  request-timeout: 5s
  temperature: 0.3
  batch: true
  sim-seed: 42
dlq:
  list:
    limit: 7
`)
	t.Setenv("PIPELINE_RPM", "120")
	t.Setenv("PIPELINE_DATA_DIR", "")
	os.Unsetenv("PIPELINE_DATA_DIR")
	var cfg *Config
	if err := testApp(&cfg).Run([]string{"pipeline", "run", "--config", p, "--max-attempts", "5"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"data-dir": cfg.Broker.DataDir == "/from/file", "concurrency (section over top level)": cfg.Workers.Concurrency == 4,
		"max-attempts (flag over file)": cfg.Heal.MaxAttempts == 5, "rpm (env)": cfg.Model.RPM == 120,
		"fallback-model":  reflect.DeepEqual(cfg.Budget.FallbackModels, []string{"openai:a", "openai:b"}),
		"request-timeout": cfg.Model.RequestTimeout == 5*time.Second, "temperature": cfg.Heal.Temperature == 0.3,
		"batch": cfg.Batch.Enabled, "sim-seed": cfg.Model.SimSeed == 42, "default": cfg.Model.Spec == "sim",
		"IsSet of a file's value": cfg.IsSet("request-timeout"), "IsSet of a default": !cfg.IsSet("rate-window"),
		"command": cfg.Command == "run",
	}
	for name, ok := range want {
		if ok != true {
			t.Errorf("%s: not in effect: %+v", name, cfg)
		}
	}
	if err := testApp(&cfg).Run([]string{"pipeline", "dlq", "list", "--config", p}); err != nil {
		t.Fatal(err)
	}
	if cfg.Filter.Limit != 7 {
		t.Errorf("dlq list: limit %d, want 7 from its nested section", cfg.Filter.Limit)
	}
}

func TestFileMistakes(t *testing.T) {
	for text, want := range map[string]string{
		"run:\n  concurency: 3\n":          `:2: unknown key "run.concurency"`,
		"dlq:\n  list:\n    limt: 3\n":     `:3: unknown key "dlq.list.limt"`,
		"dlq:\n  lst:\n    limit: 3\n":     `:2: unknown key "dlq.lst"`,
		"concurrency: 3\nconcurrency: 4\n": `:2: key "concurrency" written twice (first on line 1)`,
		"run:\n  max-attempts: [1, x]\n":   `:2: key "run.max-attempts": invalid value "x"`,
		"run:\n  until-idle: maybe\n":      `:2: key "run.until-idle": invalid value "maybe"`,
		"run: [\n":                         `c.yaml: `,
		"config: other.yaml\n":             `:1: unknown key "config"`,
	} {
		p := write(t, text)
		var cfg *Config
		err := testApp(&cfg).Run([]string{"pipeline", "run", "--config", p})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%q: %v, want an error starting with the file and naming %q", text, err, want)
		}
	}
}

func TestShowSources(t *testing.T) {
	p := write(t, "data-dir: /d\nrun:\n  max-attempts: 4\n")
	t.Setenv("PIPELINE_CONCURRENCY", "8")
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg *Config
	app := testApp(&cfg)
	settings, err := Show(app.Commands[0], []string{"run"}, f, []string{"--rpm", "60"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range settings {
		got[s.Name] = s.Value + " | " + s.From
	}
	for name, want := range map[string]string{
		"data-dir": "/d | file " + p + ":1", "max-attempts": "4 | file " + p + ":3",
		"concurrency": "8 | env PIPELINE_CONCURRENCY", "rpm": "60 | flag", "breaker-threshold": "5 | default",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	names := []string{"concurrency", "max-attempts", "model", "dlq"}
	for key, want := range map[string]string{
		"concurency":   `; did you mean "concurrency"?`,
		"max-attemps":  `; did you mean "max-attempts"?`,
		"modle":        `; did you mean "model"?`,
		"temperature":  "", // nothing near
		"db":           "", // two letters: one edit is half of it
		"concurrency2": `; did you mean "concurrency"?`,
	} {
		if got := didYouMean(key, names); got != want {
			t.Errorf("didYouMean(%q) = %q, want %q", key, got, want)
		}
	}
}
