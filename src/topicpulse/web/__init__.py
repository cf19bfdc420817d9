"""The topic pages on the web, served from the bot's own process (or alone: topicpulse serve)."""
