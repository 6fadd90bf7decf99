"""The recording proxy: an agent's model API base URL pointed at ctxweb, with its ctxweb key in a
header, and nothing else changed. Calls pass through to the provider chunk by chunk; ctxweb
records each model call as a turn once the answer has gone back."""
