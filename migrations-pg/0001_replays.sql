CREATE TABLE "replays" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant" text NOT NULL,
	"model_version" text NOT NULL,
	"decoding" text NOT NULL,
	"request" json NOT NULL,
	"summary" json NOT NULL,
	"sessions" json NOT NULL,
	"steps" json NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "replays_tenant_id" ON "replays" USING btree ("tenant","id");