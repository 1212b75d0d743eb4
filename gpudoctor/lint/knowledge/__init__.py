"""What each framework's APIs do to a process, as data (one table per framework)."""
