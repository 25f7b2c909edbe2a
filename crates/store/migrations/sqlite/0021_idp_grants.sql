-- What a person's identity-provider groups brought at their last sign-in (docs/sign-in.md),
-- so that access reviews list those grants too; and where a review's grant comes from.
ALTER TABLE federated_identity ADD COLUMN idp_grants TEXT NOT NULL DEFAULT '[]';
ALTER TABLE access_review_grant ADD COLUMN source TEXT;
