package main

import (
	"os"
	"strings"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nkeys"
	"github.com/urfave/cli/v2"
)

// Environment variables that hold secrets: their values are redacted
// wherever they appear, in logs and in everything stored.
var secretEnv = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}

// URL settings whose user info is a secret (flags, then env vars).
var (
	secretURLFlags = []string{"llm-url", "nats-url"}
	secretURLEnv   = []string{"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "NATS_URL"}
)

// learnSecrets registers with e.secrets every secret the command's
// settings hold: API keys, the user info (and a query's key or token) of
// the model's and NATS's URLs, the values of --llm-header, and the JWT and
// seed of a NATS credentials file.
func (e *env) learnSecrets(c *cli.Context) {
	for _, k := range secretEnv {
		e.secrets.Add(os.Getenv(k))
	}
	for _, f := range secretURLFlags {
		e.secrets.AddURL(c.String(f))
	}
	for _, h := range c.StringSlice("llm-header") {
		if _, v, ok := strings.Cut(h, ":"); ok {
			e.secrets.Add(strings.TrimSpace(v))
		}
	}
	for _, k := range secretURLEnv {
		e.secrets.AddURL(os.Getenv(k))
	}
	if p := c.String("nats-creds"); p != "" {
		e.secrets.Add(credsSecrets(p)...)
	}
}

// learnConnSecrets registers the secrets a connection holds (the embedded
// server's password).
func (e *env) learnConnSecrets(conn *broker.Conn) {
	e.secrets.Add(conn.Secrets()...)
}

// credsSecrets reads the user JWT and the seed of a NATS credentials file.
// An unreadable file yields nothing here: connecting with it reports the
// error.
func credsSecrets(path string) []string {
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
