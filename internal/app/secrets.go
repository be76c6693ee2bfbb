package app

import (
	"os"
	"strings"

	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/nats-io/nkeys"
)

// SecretEnv is the environment variables that hold secrets: their values
// are redacted wherever they appear, in logs and in everything stored.
func SecretEnv() []string { return []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} }

// secretURLEnv is the environment variables of URLs whose user info is a
// secret (the URL settings' own are read from the config).
func secretURLEnv() []string { return []string{"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "NATS_URL"} }

// LearnSecrets registers with red every secret the command's
// settings hold: API keys, the user info (and a query's key or token) of
// the model's and NATS's URLs, the values of --llm-header, and the JWT and
// seed of a NATS credentials file.
func LearnSecrets(red *secret.Redactor, cfg *config.Config) {
	for _, k := range SecretEnv() {
		red.Add(os.Getenv(k))
	}
	for _, u := range []string{cfg.Model.URL, cfg.Broker.URL} {
		red.AddURL(u)
	}
	for _, h := range cfg.Model.Headers {
		if _, v, ok := strings.Cut(h, ":"); ok {
			red.Add(strings.TrimSpace(v))
		}
	}
	for _, k := range secretURLEnv() {
		red.AddURL(os.Getenv(k))
	}
	if p := cfg.Broker.Creds; p != "" {
		red.Add(CredsSecrets(p)...)
	}
}

// CredsSecrets reads the user JWT and the seed of a NATS credentials file.
// An unreadable file yields nothing here: connecting with it reports the
// error.
func CredsSecrets(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	if jwt, err := nkeys.ParseDecoratedJWT(b); err == nil {
		out = append(out, jwt)
	}
	if kp, err := nkeys.ParseDecoratedNKey(b); err == nil {
		if seed, err := kp.Seed(); err == nil {
			out = append(out, string(seed))
		}
	}
	return out
}
