CREATE TABLE "email_contents" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"body_source" text NOT NULL,
	"variables" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"headers" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"attachments" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "content_id" uuid;--> statement-breakpoint
-- Carry existing emails over: each gets a content row of its own, with the email's id as its id.
INSERT INTO "email_contents" ("id", "project_id", "body_source", "variables", "headers", "attachments", "created_at")
  SELECT "id", "project_id", "body_source", "variables", "headers", "attachments", "created_at" FROM "emails";--> statement-breakpoint
UPDATE "emails" SET "content_id" = "id";--> statement-breakpoint
ALTER TABLE "emails" ALTER COLUMN "content_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "email_contents" ADD CONSTRAINT "email_contents_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "email_contents_project_idx" ON "email_contents" USING btree ("project_id");--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_content_id_email_contents_id_fk" FOREIGN KEY ("content_id") REFERENCES "public"."email_contents"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "emails_content_idx" ON "emails" USING btree ("content_id");--> statement-breakpoint
ALTER TABLE "emails" DROP COLUMN "body_source";--> statement-breakpoint
ALTER TABLE "emails" DROP COLUMN "variables";--> statement-breakpoint
ALTER TABLE "emails" DROP COLUMN "headers";--> statement-breakpoint
ALTER TABLE "emails" DROP COLUMN "attachments";