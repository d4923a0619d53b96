ALTER TABLE `sessions` ADD `memory_placement` text DEFAULT 'system' NOT NULL;--> statement-breakpoint
ALTER TABLE `steps` ADD `turn` text;