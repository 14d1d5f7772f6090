CREATE TABLE "installation" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"secret_check" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "installation_single_row" CHECK ("installation"."id" = 1)
);
--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "postal_address" text;