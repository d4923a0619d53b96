CREATE TABLE `replays` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant` text NOT NULL,
	`model_version` text NOT NULL,
	`decoding` text NOT NULL,
	`request` text NOT NULL,
	`summary` text NOT NULL,
	`sessions` text NOT NULL,
	`steps` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `replays_tenant_id` ON `replays` (`tenant`,`id`);