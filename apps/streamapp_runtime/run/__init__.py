"""Run the compiled queries as a process: the session, settings, start and supervision, metrics and health."""
