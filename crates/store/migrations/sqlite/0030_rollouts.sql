-- Waves (issue 46): how an execution rolls out (JSON, null when all at once), the last wave
-- released, and each target's wave, fixed when it is stored. Only released waves are sent.
ALTER TABLE execution ADD COLUMN rollout TEXT;
ALTER TABLE execution ADD COLUMN released_wave INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_target ADD COLUMN wave INTEGER NOT NULL DEFAULT 0;
-- What the sweep looks at every second: the rollouts still under way.
CREATE INDEX execution_rolling ON execution (deadline_ms) WHERE rollout IS NOT NULL;
