ALTER TABLE `models` ADD `engine` text DEFAULT 'builtin' NOT NULL;--> statement-breakpoint
ALTER TABLE `models` ADD `engine_config` text;--> statement-breakpoint
ALTER TABLE `steps` ADD `engine_record` text;