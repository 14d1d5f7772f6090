ALTER TABLE "segments" ADD COLUMN "condition_bytes" integer;--> statement-breakpoint
-- The segments already stored (a project has few; each condition is printed once).
UPDATE "segments" SET "condition_bytes" = octet_length("condition"::text) WHERE "condition" IS NOT NULL;
