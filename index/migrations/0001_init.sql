-- The analytics index: one row per job run in outcomes (small, hot), the
-- transcript in payloads (cold, compressed), the per-attempt trace in
-- attempts and one row per diagnostic per attempt in failures.
-- Times are Unix milliseconds (UTC).

CREATE TABLE outcomes (
	id                INTEGER PRIMARY KEY,
	job_id            TEXT    NOT NULL,
	run               INTEGER NOT NULL,
	schema_id         TEXT    NOT NULL,
	version           TEXT    NOT NULL,
	dead              INTEGER NOT NULL,  -- 1 dead-lettered, 0 succeeded
	class             TEXT    NOT NULL,
	reason            TEXT    NOT NULL,
	model             TEXT    NOT NULL,
	attempts          INTEGER NOT NULL,
	deliveries        INTEGER NOT NULL,
	prompt_tokens     INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	tokens            INTEGER NOT NULL,  -- prompt + completion, every attempt
	heal_tokens       INTEGER NOT NULL,  -- prompt + completion of attempts 2..n
	first_path        TEXT    NOT NULL,  -- first failing path of the last attempt
	started_at        INTEGER NOT NULL,
	finished_at       INTEGER NOT NULL,
	replayed          INTEGER NOT NULL DEFAULT 0,
	UNIQUE (job_id, run)
);

-- dlq list / purge / export / retention: dead letters newest first.
CREATE INDEX outcomes_by_time ON outcomes (dead, replayed, finished_at);
-- stats and the heal funnel, covering.
-- (in GROUP BY order, so the funnel streams without a temp b-tree)
CREATE INDEX outcomes_funnel ON outcomes (schema_id, dead, attempts, class, version, finished_at, tokens, heal_tokens);

CREATE TABLE payloads (
	outcome_id INTEGER PRIMARY KEY REFERENCES outcomes (id) ON DELETE CASCADE,
	encoding   INTEGER NOT NULL,  -- 0 JSON, 1 DEFLATE-compressed JSON
	body       BLOB    NOT NULL   -- the Outcome (without Data)
);

CREATE TABLE attempts (
	outcome_id        INTEGER NOT NULL REFERENCES outcomes (id) ON DELETE CASCADE,
	n                 INTEGER NOT NULL,
	temperature       REAL    NOT NULL,
	class             TEXT    NOT NULL,
	finish_reason     TEXT    NOT NULL,
	repairs           TEXT    NOT NULL,  -- comma-separated sanitizer stages
	diagnostics       INTEGER NOT NULL,  -- kept + omitted
	prompt_tokens     INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	cached_tokens     INTEGER NOT NULL,
	reasoning_tokens  INTEGER NOT NULL,
	latency_ms        INTEGER NOT NULL,
	transport_retries INTEGER NOT NULL,
	PRIMARY KEY (outcome_id, n)
) WITHOUT ROWID;

-- One row per fingerprint ever seen.
CREATE TABLE clusters (
	id          TEXT    PRIMARY KEY,
	fp_version  INTEGER NOT NULL,
	schema_id   TEXT    NOT NULL,
	version     TEXT    NOT NULL,
	path        TEXT    NOT NULL,
	keyword     TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX clusters_by_schema ON clusters (schema_id, version, path);
CREATE INDEX clusters_by_path ON clusters (path);

-- One row per diagnostic per attempt. lead is 1 on the first row of a
-- cluster within an outcome, so counting lead rows counts distinct job runs.
-- dead and at are copied from the outcome so the report never joins.
CREATE TABLE failures (
	outcome_id INTEGER NOT NULL REFERENCES outcomes (id) ON DELETE CASCADE,
	attempt    INTEGER NOT NULL,
	seq        INTEGER NOT NULL,
	cluster    TEXT    NOT NULL,
	lead       INTEGER NOT NULL,
	dead       INTEGER NOT NULL,
	at         INTEGER NOT NULL,
	received   TEXT    NOT NULL,  -- cut to 64 bytes; the whole value is in the payload
	PRIMARY KEY (outcome_id, attempt, seq)
) WITHOUT ROWID;

-- The report: clusters, first/last seen, streaks, examples, received values.
CREATE INDEX failures_lead ON failures (cluster, at, dead, received) WHERE lead = 1;
