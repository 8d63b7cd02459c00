-- The name of the API key a request came with, when API keys are in use.
ALTER TABLE audit_log ADD COLUMN api_key text;
