-- The index as operators read it with sqlite3: payloads as JSON text, and
-- views with ISO 8601 times, words instead of flags and the transcript as
-- JSON that json_extract reads. docs/INDEX.md describes every table and
-- view, with example queries.
--
-- Payloads were stored compressed (S2, DEFLATE in the oldest files) with
-- an encoding number beside them, which no SQL can read. From this
-- migration on, payloads.body is the Outcome as JSON text, whatever its
-- size. The Go part of the migration (convertPayloads, run first in the
-- same transaction) decompresses the older rows to text; the statements
-- below move every row into the new table, so a file written by an older
-- binary reads like a new one.

CREATE TABLE payloads_text (
	outcome_id INTEGER PRIMARY KEY REFERENCES outcomes (id) ON DELETE CASCADE,
	body       TEXT    NOT NULL  -- the Outcome as JSON text, without its data: job, trace (one object per model call), reason, hint, ...
);
INSERT INTO payloads_text (outcome_id, body) SELECT outcome_id, CAST(body AS TEXT) FROM payloads;
DROP TABLE payloads;
ALTER TABLE payloads_text RENAME TO payloads;

-- Times in the tables are integer Unix milliseconds (UTC); the views turn
-- them into ISO 8601 text, millisecond precision, NULL when unset (0).

-- One row per job run, both statuses. transcript is
-- {"job": <the job as submitted>, "attempts": [<one object per model call>]}.
CREATE VIEW v_outcomes AS
SELECT
	o.id                                                   AS outcome_id,
	o.job_id,
	o.run,                                                 -- 0 as submitted, n for the n-th replay
	o.schema_id,
	o.version,                                             -- schema version (hash of the canonical schema)
	CASE o.dead WHEN 1 THEN 'dead_lettered' ELSE 'succeeded' END AS status,
	o.class,                                               -- failure class; '' on success
	o.reason,
	o.model,
	o.attempts,                                            -- model calls, transport retries aside
	o.deliveries,
	o.prompt_tokens,
	o.completion_tokens,
	o.tokens,                                              -- prompt + completion, every attempt
	o.heal_tokens,                                         -- prompt + completion of attempts 2..n
	o.first_path,                                          -- first failing path of the last attempt (dead letters)
	CASE WHEN o.started_at > 0 THEN printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', o.started_at / 1000, 'unixepoch'), o.started_at % 1000) END AS started_at,
	CASE WHEN o.finished_at > 0 THEN printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', o.finished_at / 1000, 'unixepoch'), o.finished_at % 1000) END AS finished_at,
	CASE WHEN o.started_at > 0 AND o.finished_at >= o.started_at THEN o.finished_at - o.started_at END AS duration_ms,
	o.replayed,                                            -- 1 when a later run of the job exists or was asked for
	json_object('job', json_extract(p.body, '$.job'),
	            'attempts', COALESCE(json_extract(p.body, '$.trace'), json_array())) AS transcript
FROM outcomes o LEFT JOIN payloads p ON p.outcome_id = o.id;

-- One row per dead letter, replayed ones included. replay_outcome says
-- what became of a replayed dead letter: NULL never replayed, 'pending' no
-- later run indexed yet, 'succeeded' a later run succeeded (the report
-- counts it as "replayed, healed"), 'dead_lettered' every later run died.
CREATE VIEW v_dead_letters AS
SELECT
	o.id                                                   AS outcome_id,
	o.job_id,
	o.run,
	o.schema_id,
	o.version,
	o.class,
	o.reason,
	json_extract(p.body, '$.hint')                         AS hint,
	o.model,
	o.attempts,
	o.first_path,
	CASE WHEN o.finished_at > 0 THEN printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', o.finished_at / 1000, 'unixepoch'), o.finished_at % 1000) END AS failed_at,
	o.replayed,
	CASE
		WHEN o.replayed = 0 THEN NULL
		WHEN EXISTS (SELECT 1 FROM outcomes n WHERE n.job_id = o.job_id AND n.run > o.run AND n.dead = 0) THEN 'succeeded'
		WHEN EXISTS (SELECT 1 FROM outcomes n WHERE n.job_id = o.job_id AND n.run > o.run) THEN 'dead_lettered'
		ELSE 'pending'
	END                                                    AS replay_outcome,
	json_object('job', json_extract(p.body, '$.job'),
	            'attempts', COALESCE(json_extract(p.body, '$.trace'), json_array())) AS transcript
FROM outcomes o LEFT JOIN payloads p ON p.outcome_id = o.id
WHERE o.dead = 1;

-- One row per model call of every job run (first-pass successes
-- included), read from the transcript: the raw output, the sanitizer
-- repairs and the diagnostics as JSON arrays.
CREATE VIEW v_attempts AS
SELECT
	o.id                                                   AS outcome_id,
	o.job_id,
	o.run,
	o.schema_id,
	o.version,
	CASE o.dead WHEN 1 THEN 'dead_lettered' ELSE 'succeeded' END AS status,
	COALESCE(NULLIF(json_extract(a.value, '$.n'), 0), a.key + 1) AS n,
	json_extract(a.value, '$.temperature')                 AS temperature,
	json_extract(a.value, '$.raw')                         AS raw,           -- the model's output as it came
	COALESCE(json_extract(a.value, '$.repairs'), '[]')     AS repairs,       -- sanitizer stages applied, JSON array
	COALESCE(json_extract(a.value, '$.class'), '')         AS class,         -- '' when the output was valid
	COALESCE(json_extract(a.value, '$.finish_reason'), '') AS finish_reason,
	COALESCE(json_extract(a.value, '$.diagnostics'), '[]') AS diagnostics,   -- JSON array of {path, keyword, message, expected, received}
	COALESCE(json_extract(a.value, '$.diagnostics_omitted'), 0) AS diagnostics_omitted,
	COALESCE(json_extract(a.value, '$.prompt_tokens'), 0)  AS prompt_tokens,
	COALESCE(json_extract(a.value, '$.completion_tokens'), 0) AS completion_tokens,
	COALESCE(json_extract(a.value, '$.cached_tokens'), 0)  AS cached_tokens,
	COALESCE(json_extract(a.value, '$.reasoning_tokens'), 0) AS reasoning_tokens,
	COALESCE(json_extract(a.value, '$.latency_ms'), 0)     AS latency_ms,
	COALESCE(json_extract(a.value, '$.transport_retries'), 0) AS transport_retries
FROM outcomes o JOIN payloads p ON p.outcome_id = o.id, json_each(p.body, '$.trace') a;

-- One row per failure cluster per job run: the fingerprint (path pattern,
-- keyword), the first failing attempt, the value received there (cut to
-- 64 bytes) and whether the run's last validated attempt fixed it.
CREATE VIEW v_failures AS
SELECT
	f.outcome_id,
	o.job_id,
	o.run,
	c.schema_id,
	c.version,
	f.cluster,                                             -- the report's cluster id
	c.path,                                                -- path pattern, array indices as *
	c.keyword,
	f.attempt,                                             -- first attempt that failed on it
	f.received,
	CASE f.dead WHEN 1 THEN 'dead_lettered' ELSE 'succeeded' END AS status,
	f.fixed,
	CASE WHEN f.at > 0 THEN printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', f.at / 1000, 'unixepoch'), f.at % 1000) END AS finished_at
FROM failures f JOIN outcomes o ON o.id = f.outcome_id JOIN clusters c ON c.id = f.cluster
WHERE f.lead = 1;
