-- Uploaded images (modules/uploads): the per-project quota counts these rows, GET /uploads lists them and
-- DELETE /uploads/* removes one. Images uploaded before this migration have no row: not counted, not listed.
CREATE TABLE "uploads" (
	"key" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"size" integer NOT NULL,
	"content_type" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "uploads" ADD CONSTRAINT "uploads_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "uploads_project_created_idx" ON "uploads" USING btree ("project_id","created_at","key");