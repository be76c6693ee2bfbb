// Package secret knows the secrets a process holds (API keys, the
// credentials inside URLs, NATS credentials) and replaces every form of
// them it can recognise with "[REDACTED]" in text about to be logged or
// stored: model answers, results, dead letters and log records alike,
// whoever wrote the secret there.
//
//	r := secret.New(os.Getenv("OPENAI_API_KEY"))
//	r.AddURL("https://user:pass@llm.internal/v1")
//	log := slog.New(r.Handler(slog.NewTextHandler(os.Stderr, nil)))
//	stored := r.Bytes(payload) // payload itself when it holds no secret
//
// Each secret is matched as written, JSON-escaped, URL-escaped and, for a
// URL's user:password, in the base64 form of an HTTP Basic Authorization
// header. A secret shorter than MinLen bytes is matched only inside those
// composite forms: replacing every occurrence of a three-letter password
// would destroy ordinary text without protecting anything.
package secret
