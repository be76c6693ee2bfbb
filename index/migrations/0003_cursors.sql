-- Where the sink stands in each stream: every message of the stream up to
-- seq is indexed (or was absent when the sink looked). The sink writes it
-- in the same transaction as the rows it indexed, and resumes from it
-- after a restart or a crash, so nothing is skipped and nothing is read
-- twice but what the crash left uncommitted.

CREATE TABLE stream_cursors (
	stream TEXT    PRIMARY KEY,
	seq    INTEGER NOT NULL
) WITHOUT ROWID;
