-- The event counters (event_counts, event_day_counts; migrations 0009, 0012) and the tracked events'
-- day rollup (event_name_days, migration 0004) shared 16 rows per key by the writer's pid modulo 16.
-- Two transactions of one shard could then lock two of those rows in opposite orders and deadlock
-- (a hard bounce records `email.bounced` and then `contact.unsubscribed`, while deleting another
-- contact of the project subtracts its events in name order, `contact.unsubscribed` first), and the
-- second of two writers on one shard waited for the first to commit. From here a row is the writer's own, as migration 0018
-- made email_counts: `shard` is its pid, no other live backend has it, so a counter write never waits.
-- db/counter-rows.ts folds the rows of exited backends into shard 0.
--
-- No event counter or rollup row is written from here to this migration's commit: event writers wait
-- (the events they write are counted once they go on, by the functions below). Locked in the order
-- an event writer takes them (the rollup in its statement, the counters in its trigger at the
-- statement's end), so that a writer already holding the first is waited for, not deadlocked with.
LOCK TABLE "event_name_days", "event_counts", "event_day_counts" IN ACCESS EXCLUSIVE MODE;--> statement-breakpoint
CREATE OR REPLACE FUNCTION "event_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_counts AS c (project_id, name, shard, count)
  SELECT r.project_id, r.name, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY r.project_id, r.name ORDER BY r.project_id, r.name
  ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count;
  INSERT INTO event_day_counts AS c (project_id, name, day, shard, count)
  SELECT r.project_id, r.name, (r.created_at AT TIME ZONE 'UTC')::date, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Rows deleted with their project (its cascade) have no counter left to subtract from.
CREATE OR REPLACE FUNCTION "event_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH removed AS MATERIALIZED (SELECT r.project_id, r.name, count(*) AS n FROM old_rows AS r GROUP BY r.project_id, r.name)
  INSERT INTO event_counts AS c (project_id, name, shard, count)
  SELECT r.project_id, r.name, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
   ORDER BY r.project_id, r.name
  ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count;
  WITH removed AS MATERIALIZED (
    SELECT r.project_id, r.name, (r.created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM old_rows AS r GROUP BY 1, 2, 3
  )
  INSERT INTO event_day_counts AS c (project_id, name, day, shard, count)
  SELECT r.project_id, r.name, r.day, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
   ORDER BY r.project_id, r.name, r.day
  ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Each key's 16 rows folded into one, shard 0 (the sums stay): set aside, the table emptied, its
-- `shard` widened to integer (pids pass 32,767) while it is empty, so no rewrite, and the sums put back.
CREATE TABLE "event_counts_folded" AS SELECT "project_id", "name", sum("count")::bigint AS "count" FROM "event_counts" GROUP BY 1, 2;--> statement-breakpoint
CREATE TABLE "event_day_counts_folded" AS SELECT "project_id", "name", "day", sum("count")::bigint AS "count" FROM "event_day_counts" GROUP BY 1, 2, 3;--> statement-breakpoint
CREATE TABLE "event_name_days_folded" AS SELECT "project_id", "name", "day", sum("count")::integer AS "count" FROM "event_name_days" GROUP BY 1, 2, 3;--> statement-breakpoint
TRUNCATE "event_counts", "event_day_counts", "event_name_days";--> statement-breakpoint
ALTER TABLE "event_counts" ALTER COLUMN "shard" SET DATA TYPE integer;--> statement-breakpoint
ALTER TABLE "event_day_counts" ALTER COLUMN "shard" SET DATA TYPE integer;--> statement-breakpoint
ALTER TABLE "event_name_days" ALTER COLUMN "shard" SET DATA TYPE integer;--> statement-breakpoint
INSERT INTO "event_counts" ("project_id", "name", "shard", "count")
SELECT "project_id", "name", 0, "count" FROM "event_counts_folded" ORDER BY 1, 2;--> statement-breakpoint
INSERT INTO "event_day_counts" ("project_id", "name", "day", "shard", "count")
SELECT "project_id", "name", "day", 0, "count" FROM "event_day_counts_folded" ORDER BY "project_id", "day", "name";--> statement-breakpoint
INSERT INTO "event_name_days" ("project_id", "name", "day", "shard", "count")
SELECT "project_id", "name", "day", 0, "count" FROM "event_name_days_folded" ORDER BY 1, 2, 3;--> statement-breakpoint
DROP TABLE "event_counts_folded", "event_day_counts_folded", "event_name_days_folded";
