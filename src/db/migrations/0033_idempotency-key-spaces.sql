-- A public key's Idempotency-Keys (/v1/track) are a key space of their own. The public key ships in
-- web pages; sharing the secret key's space let whoever held it claim a key first, so that a
-- /v1/send with that key was a 409 and never sent, or read a send's response (its recipients) from
-- the 409's originalResponse. docs/decisions.md § Idempotency.
ALTER TABLE "idempotency_keys" ADD COLUMN "key_type" text DEFAULT 'secret' NOT NULL;--> statement-breakpoint
UPDATE "idempotency_keys" SET "key_type" = 'public' WHERE "path" = '/v1/track';--> statement-breakpoint
ALTER TABLE "idempotency_keys" DROP CONSTRAINT "idempotency_keys_project_id_key_pk";--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_project_id_key_type_key_pk" PRIMARY KEY("project_id","key_type","key");
