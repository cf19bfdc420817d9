"""The Telegram side of topicpulse: the Application, its jobs, command handlers and sender."""
