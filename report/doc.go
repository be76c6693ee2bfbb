// Package report turns the dead-letter index into what schema authors and
// operators come for: failures grouped by fingerprint with heal rates and
// evidence, fields flagged impossible, the heal funnel per schema, and the
// static lint findings of the schemas. It only reads the store (dlq).
//
//	r, err := report.Build(ctx, store, report.Options{Schema: "invoice", Lint: findings})
//	...
//	err = r.Render(os.Stdout, "table") // or "json", "markdown", "html"
//
// # Scope
//
// By default a report covers each schema's latest version: the version of
// the schema's most recent outcome in the selection (the index's, not a
// registry's: the report shows what the index holds, and a version with
// no outcome yet would show nothing). Options.Version "all" covers every
// version (history), each cluster and funnel row labelled with its own; a
// version hash, or its prefix, covers the versions it names. Every format opens with what it covers:
// the index file, the range of the outcomes' finish times, when it was
// generated (Options.Now) and the totals (jobs, succeeded, dead-lettered,
// of which replayed and healed, tokens; no cost: the index holds no
// prices), and says how many clusters it lists of how many ("20 of 29
// clusters (--top 0 for all)").
//
// # Replays
//
// A dead letter whose job later succeeded on a replay (a later run of the
// same job id, see dlq) is "replayed, healed": it is counted in its
// cluster's dead_letters and replayed_healed but toward no rate and no
// flag, and is no example of a flag. After a schema fix and a successful
// replay the old version's cluster is out of the default report (not the
// latest version) and unflagged in --version all.
//
// # Clusters
//
// A cluster is every failure with one fingerprint: schema id + schema
// version + path pattern (array indices as "*") + keyword, versioned by
// cluster.FingerprintVersion. Counts are per job run (a replay is a new run):
// jobs is the runs where the fingerprint failed at some attempt, dead_letters
// those of them that were dead-lettered, replayed_healed those dead letters
// whose replay succeeded. The rates are over the counted runs, jobs -
// replayed_healed: heal_rate = (jobs - dead_letters) / counted, the share
// that still succeeded, and fix_rate = (fixed less the replayed, healed) /
// counted, the share where a later attempt no longer failed on the
// fingerprint (the run's last validated attempt had no diagnostic of it:
// see dlq's Fixed); both 0 when nothing is counted. fix_rate >= heal_rate;
// they differ by the dead letters that died of other fields. The flag
// rules below count the same runs.
//
// A cluster is impossible when jobs >= MinJobs (default 3) and both
// heal_rate and fix_rate are <= MaxHealRate (default 0.10), or when its last
// Streak (3) job runs were all dead letters with the fingerprint still
// failing at their end. When the heal rate alone would flag it (or its last
// Streak runs were dead letters) but the model fixed it, it is masked
// instead: its reason says "masked: fixed in N% of its jobs, which were
// dead-lettered for other fields" and names the fingerprint most often still
// failing in those jobs (index.ClusterBlockers), and its suggestion says to
// fix that one first. Every impossible flag carries a reason with its
// counts, example job ids, the received values and a one-line suggestion
// chosen by keyword. Clusters are sorted by the dead letters where the
// fingerprint was still failing at the end, then dead letters, then jobs,
// so the fields that kill jobs come first.
//
// # Funnel
//
// Per schema version (reports never mix versions), over every run in the
// selection: first_pass (share of jobs
// valid at the first model call), succeeded_at (per attempt count k, the
// jobs that succeeded at their k-th call and their share of all jobs),
// dead_by_class (dead letters by failure class, share of all jobs),
// tokens_per_succeeded (prompt + completion tokens of the succeeded jobs per
// succeeded job) and heal_token_share (share of all tokens spent on attempts
// after the first). Cost and models (cost.go): cost_usd (every attempt
// whose model's price was known, null when none was), cost_per_succeeded
// (cost_usd per succeeded job, the failures paid for included),
// heal_cost_share (share of cost_usd spent on attempts after the first),
// healed_by_fallback (succeeded jobs answered by another model than their
// first attempt's) and models (the jobs per model of their final answer).
// Options.Model limits the funnel and the clusters to the jobs whose final
// answer came from one model.
//
// # JSON format (stable)
//
//	{
//	  "generated_at",                          // RFC 3339, UTC
//	  "source",                                // the index file
//	  "range":      {"from", "to"} or null,    // finish times of the outcomes covered
//	  "totals":     {"jobs", "succeeded", "dead_lettered", "replayed_healed", "tokens", "cost_usd",
//	                 "batch": {"attempts", "cost_usd"}},  // attempts through provider batches
//	  "filter":     {"schema"?, "version", "since"?, "model"?},  // version: "latest", "all" or a hash
//	  "versions":   {"<schema>": ["<version>", ...]},  // the versions covered
//	  "fingerprint_version": 1,
//	  "thresholds": {"min_jobs", "max_heal_rate", "streak"},
//	  "clusters_total",                        // clusters in the selection; "clusters" holds the top ones
//	  "clusters": [{
//	    "id",            // cluster.ID: 12 hex digits, stable
//	    "schema", "version", "path", "keyword",
//	    "dead_letters", "jobs", "replayed_healed",
//	    "heal_rate",                           // in 0..1, over jobs - replayed_healed
//	    "fixed", "fix_rate",                   // fix_rate in 0..1, >= heal_rate
//	    "impossible", "masked",                // at most one is true
//	    "reason", "suggestion",                // "" unless impossible or masked
//	    "examples",      // up to 3 job ids: newest dead letters, then newest healed
//	    "received",      // up to 5 [{"value","count"}]: JSON text of the value at the
//	                     // first failing attempt per job, over the latest 1000 jobs
//	    "first_seen", "last_seen"              // RFC 3339, UTC
//	  }],
//	  "funnel": {"<key>": {"schema", "version",
//	             "jobs", "succeeded", "dead_lettered", "replayed_healed", "first_pass",
//	             "succeeded_at": [{"attempt", "jobs", "share"}],
//	             "dead_by_class": [{"class", "jobs", "share"}],
//	             "tokens", "tokens_per_succeeded", // null when none succeeded
//	             "heal_token_share",
//	             "cost_usd", "cost_per_succeeded",  // null when no price was known
//	             "heal_cost_share", "healed_by_fallback", "batch": {"attempts", "cost_usd"},
//	             "models": [{"model", "jobs", "succeeded", "dead_lettered", "healed_by_fallback", "cost_usd"}]}},
//	  "lint": [{"schema", "file", "path", "rule", "message", "suggestion"}]
//	}
//
// The funnel's key is the schema id, or "schema@version" (the version's
// first 8 characters) for each version of a schema that has several in the
// selection; read "schema" and "version" rather than parse the key.
// Arrays are never null. Fields are only ever added.
//
// # Formats
//
// "table" is aligned text for a terminal; "markdown" GitHub tables; "html"
// one self-contained file (inline CSS, inline SVG bar charts of the top 15
// clusters and of the funnel; no script, nothing loaded from a network).
// The golden files under testdata/ pin every format: `go test ./report
// -run TestRenderGolden -update` rewrites them.
//
// # Cost
//
// Build runs one GROUP BY over a covering index of the outcomes for the
// funnel (in GROUP BY order; it also gives the versions, the range and
// the totals), one over a partial covering index of the failures (one row
// per fingerprint per job run, with dead and fixed), and a few bounded
// index range reads per cluster (ClusterBlockers only for masked ones).
// The replayed, healed dead letters are read once per statement from the
// partial index of dead letters. It never reads payloads. See
// BenchmarkBuild.
package report
