-- dlq list, purge, export and retention read dead letters by time; the
-- index holds only them, so a success costs one b-tree insert less.
DROP INDEX outcomes_by_time;
CREATE INDEX outcomes_dead_by_time ON outcomes (dead, replayed, finished_at) WHERE dead = 1;
