// Package ui is the operators' console: a web view of the pipeline over the
// SQLite index and the NATS streams, from "what is failing" to "this field
// of this schema version, these values, these transcripts" to "replay these
// after the fix".
//
// It serves server-rendered pages (html/template, assets embedded, nothing
// fetched from elsewhere, usable without JavaScript; a small script sorts
// tables and refreshes the overview). The page skeleton, the partials and
// the stylesheet are the ones the HTML report is rendered with
// (internal/htmlview):
//
//	/                      overview: jobs, succeeded, dead-lettered, pending,
//	                       in flight, rate, the breaker, the heal funnel
//	/clusters              the report's clusters (?schema, version, class,
//	                       model, keyword, top)
//	/clusters/{id}         one cluster: evidence, values, its dead letters
//	/dead-letters          dead letters (?cluster, schema, class, path, model,
//	                       since, until, replayed, page)
//	/dead-letters/{job}    one job's whole transcript (the id path-escaped;
//	/job?id=               the ids "." and ".." go in the query: see JobURL)
//	/schemas               versions, lint findings, the fields failing most
//	/overview/live         the overview's figures alone (the page swaps them in)
//	/api/overview          the overview's figures as JSON
//
// It reads what `pipeline report` and `pipeline dlq` read (report.Build,
// index.Store's queries, broker.Conn.Pending) and acts only through package
// actions, as `pipeline dlq replay` and `dlq purge` do; it writes no SQL of
// its own. Every action is a POST carrying its session's CSRF token; the
// first POST shows what would be done (the dry run), a second one with
// confirm=yes and the ids shown does it, and the result is shown and
// logged.
//
// Safety: every request must name the console in its Host (Config.Addr's
// host, the loopback names when that is loopback, Config.Hosts), else 421:
// a page of another site whose name was rebound to this machine reads and
// posts nothing. CheckAddr refuses an address other than loopback unless a
// token of MinTokenLen characters is set; with a token every request needs
// it (a bearer header, or the session the login form opens: a random id in
// the cookie, never the token), compared in constant time, and wrong
// tokens are throttled per client and over all clients (429). Each session
// has its own CSRF token (an HMAC of its id). Every page goes through the
// Redactor, so secrets the process knows are never shown. ReadOnly hides
// and refuses the actions.
//
// The overview's figures are kept in memory and read again at most once a
// second (see Overview for what each counts).
//
//	srv, err := ui.New(ui.Config{Store: st, Conn: conn, Addr: "127.0.0.1:8080", Secrets: redactor, Logger: log})
//	...
//	http.ListenAndServe("127.0.0.1:8080", srv)
package ui
