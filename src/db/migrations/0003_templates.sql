CREATE TABLE "templates" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"subject" text NOT NULL,
	"body" text NOT NULL,
	"from_email" text NOT NULL,
	"from_name" text,
	"reply_to" text,
	"type" text DEFAULT 'MARKETING' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "templates" ADD CONSTRAINT "templates_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "templates_project_created_idx" ON "templates" USING btree ("project_id","created_at","id");--> statement-breakpoint
CREATE INDEX "templates_project_updated_idx" ON "templates" USING btree ("project_id","updated_at","id");--> statement-breakpoint
CREATE INDEX "templates_project_name_idx" ON "templates" USING btree ("project_id","name","id");